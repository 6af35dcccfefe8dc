import type { Collection, Db } from 'mongodb';
import * as v from 'valibot';
import { sha256 } from './digest.js';
import { COLLECTIONS } from './mongo.js';
import { ErasureRecords } from './schemas.js';
import type { IdMinter } from './ids.js';

/*
 * Erasures (docs/erasure.md): `POST /admin/erasures` queues an erasure like any write, with its
 * acceptance order `seq`; the worker stores its document here (the tombstone), removes what the
 * user wrote before it, and from then on drops every write of that user with a lower `seq`.
 * The tombstone keeps a hash of the user id, never the id itself: the record of an erasure must
 * not be the last place the person's identifier lives.
 */

/** How the tombstone names its user: SHA-256 of the user id, hex. */
export function userHash(userId: string): string {
  return sha256(userId).toString('hex');
}

/** What an erasure removed, summed over its sweeps. */
export interface ErasureCounts {
  responses: number;
  records: number;
  dead_letters: number;
  idempotency_keys: number;
}

export const NO_COUNTS: ErasureCounts = Object.freeze({ responses: 0, records: 0, dead_letters: 0, idempotency_keys: 0 });

/** `feedback_erasures`: one per erasure, written by the worker when it takes the erasure up. */
export interface ErasureDoc {
  _id: string;
  user_hash: string;
  /** The datasets it is limited to; null = every dataset. */
  datasets: string[] | null;
  records: ErasureRecords;
  /** The erasure's acceptance order: writes of the user below it are erased, above it stored. */
  seq: number;
  status: 'pending' | 'done';
  removed: ErasureCounts;
  api_key: string;
  request_id: string;
  requested_at: Date;
  finished_at: Date | null;
}

export function erasureCollection(db: Db): Collection<ErasureDoc> {
  return db.collection<ErasureDoc>(COLLECTIONS.erasures);
}

const ERASURE_PREFIX = 'era_';

/**
 * Erasure ids are signed like record ids (the same minter, a dataset name no dataset can have),
 * so that `GET /admin/erasures/{id}` can tell an erasure still queued (pending) from an id never
 * issued (404) without a Redis or MongoDB key per erasure.
 */
const ERASURE_ID_SPACE = '\0erasure';

export function newErasureId(ids: IdMinter, seed: string | undefined): string {
  const recordId = seed === undefined ? ids.newRecordId(ERASURE_ID_SPACE) : ids.recordIdFromSeed(seed, ERASURE_ID_SPACE);
  return ERASURE_PREFIX + recordId.slice(recordId.indexOf('_') + 1);
}

/** True when `id` is an erasure id this service issued (its tag verifies). */
export function isIssuedErasureId(ids: IdMinter, id: string): boolean {
  return id.startsWith(ERASURE_PREFIX) && ids.isMintedRecordId(`rec_${id.slice(ERASURE_PREFIX.length)}`) && ids.datasetMatches(`rec_${id.slice(ERASURE_PREFIX.length)}`, ERASURE_ID_SPACE);
}

const Count = v.pipe(v.number(), v.integer(), v.minValue(0));

/** The 202 body of `POST /admin/erasures`. */
export const ErasureAccepted = v.object({
  erasure_id: v.pipe(v.string(), v.description('Poll `GET /admin/erasures/{erasure_id}` until `done`.')),
  status: v.literal('pending'),
});
export type ErasureAccepted = v.InferOutput<typeof ErasureAccepted>;

/** The body of `GET /admin/erasures/{id}`. */
export const ErasureView = v.object({
  erasure_id: v.string(),
  status: v.pipe(v.picklist(['pending', 'done']), v.description('`done`: every write of the user accepted before the erasure\'s 202 is removed (docs/erasure.md).')),
  datasets: v.pipe(v.nullable(v.array(v.string())), v.description('The datasets it is limited to; null = every dataset; null also while still queued.')),
  records: v.nullable(ErasureRecords),
  removed: v.pipe(
    v.object({ responses: Count, records: Count, dead_letters: Count, idempotency_keys: Count }),
    v.description('What was removed so far (responses of erased records included in `responses`).'),
  ),
  requested_at: v.pipe(v.nullable(v.string()), v.description('ISO 8601; null while the erasure is still queued.')),
  finished_at: v.pipe(v.nullable(v.string()), v.description('ISO 8601 when `done`, else null.')),
});
export type ErasureView = v.InferOutput<typeof ErasureView>;

export function erasureView(id: string, doc: ErasureDoc | null): ErasureView {
  if (doc === null) return { erasure_id: id, status: 'pending', datasets: null, records: null, removed: { ...NO_COUNTS }, requested_at: null, finished_at: null };
  return {
    erasure_id: doc._id,
    status: doc.status,
    datasets: doc.datasets,
    records: doc.records,
    removed: { ...NO_COUNTS, ...doc.removed },
    requested_at: doc.requested_at.toISOString(),
    finished_at: doc.finished_at === null ? null : doc.finished_at.toISOString(),
  };
}
