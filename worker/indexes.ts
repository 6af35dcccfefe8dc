import type { Db, IndexDescription } from 'mongodb';
import { COLLECTIONS } from '../shared/mongo.js';
import { isTransientMongoError, TransientStoreError } from './errors.js';

/** The indexes the worker's writes and the expected reads need (idempotent to create). Exported for the benches that seed a store. */
export const WORKER_INDEXES: readonly { readonly collection: string; readonly index: IndexDescription }[] = [
  // The read API pages a dataset by (created_at, _id) both ways and exports it by dataset.
  { collection: COLLECTIONS.records, index: { key: { feedback_dataset_id: 1, created_at: 1, _id: 1 }, name: 'dataset_created_id' } },
  { collection: COLLECTIONS.records, index: { key: { feedback_dataset_id: 1, external_id: 1 }, name: 'dataset_external_id' } },
  // The read API's `status=` filter (the status is an equality in front of the page order) and the progress endpoint's counts.
  { collection: COLLECTIONS.records, index: { key: { feedback_dataset_id: 1, status: 1, created_at: 1, _id: 1 }, name: 'dataset_status_created_id' } },
  // A record's responses, and the `user_id=` filter. Not unique: a response's `_id` is derived from exactly this pair
  // (shared/ids.ts responseId), so `_id` keeps one response per (record, annotator) on every store. A unique index added
  // nothing but a check per insert, which on the stand-in walks the annotator's entries and, under concurrent inserts,
  // crashed its backend (DocumentDB v0.106.0's RUM scan, docs/store.md), and which MongoDB refuses on a sharded collection.
  { collection: COLLECTIONS.responses, index: { key: { feedback_record_id: 1, user_id: 1 }, name: 'record_user' } },
  // Also the read API's `updated_since` (responses of a dataset changed since a time).
  { collection: COLLECTIONS.responses, index: { key: { feedback_dataset_id: 1, updated_at: 1 }, name: 'dataset_updated' } },
  // The agreement endpoint reads a dataset's submitted responses in record order, a unit at a time.
  { collection: COLLECTIONS.responses, index: { key: { feedback_dataset_id: 1, status: 1, feedback_record_id: 1 }, name: 'dataset_status_record' } },
  // A record's suggestions are read with it (by record); the agreement endpoint reads one question's in record order.
  { collection: COLLECTIONS.suggestions, index: { key: { feedback_record_id: 1, question: 1, agent: 1 }, name: 'record_question_agent' } },
  { collection: COLLECTIONS.suggestions, index: { key: { feedback_dataset_id: 1, question: 1, feedback_record_id: 1 }, name: 'dataset_question_record' } },
  // A store round's new records under a completion rule: were any claimed by another worker's recount (worker/completion-guards.ts)?
  // Read by the range of their orders. Sparse: guards of earlier releases have no `rseq`.
  { collection: COLLECTIONS.completionGuards, index: { key: { rseq: 1 }, name: 'rseq', sparse: true } },
  { collection: COLLECTIONS.deadLetters, index: { key: { failed_at: 1 }, name: 'failed_at' } },
  // Erasure (docs/erasure.md): every store round reads its users' tombstones; a sweep finds a user's responses and created records.
  // The guard reads the tombstones above its round's oldest write (worker/erasure-guard.ts).
  { collection: COLLECTIONS.erasures, index: { key: { seq: 1 }, name: 'seq' } },
  { collection: COLLECTIONS.responses, index: { key: { user_id: 1, seq: 1 }, name: 'user_seq' } },
  { collection: COLLECTIONS.records, index: { key: { creator_user_id: 1, seq: 1 }, name: 'creator_seq' } },
  // Webhook deliveries (shared/webhook-outbox.ts DeliveryDoc): a record's deliveries to an endpoint, the dispatcher's scan of an
  // endpoint's pending ones in order, and its deliveries in flight. Each one field: DocumentDB costs an index entry by the fields
  // of its key, on every insert and status change, and the fan-out inserts one per event (docs/webhooks.md#speed).
  // `q` and `f` are on a delivery only while pending, resp. queued: sparse.
  { collection: COLLECTIONS.webhookOutbox, index: { key: { k: 1 }, name: 'endpoint_record' } },
  { collection: COLLECTIONS.webhookOutbox, index: { key: { q: 1 }, name: 'pending_order', sparse: true } },
  { collection: COLLECTIONS.webhookOutbox, index: { key: { f: 1 }, name: 'in_flight', sparse: true } },
  // Event batches (shared/webhook-outbox.ts BatchDoc), moved into the outbox in this order per endpoint.
  { collection: COLLECTIONS.webhookBatches, index: { key: { o: 1 }, name: 'batch_order' } },
];

/** An index the store refuses for good (options conflicting with an existing index of that name…). */
export class IndexSetupError extends Error {
  constructor(collection: string, name: string, cause: unknown) {
    super(`cannot create index ${name} on ${collection}: ${(cause as Error).message}`, { cause });
    this.name = 'IndexSetupError';
  }
}

/**
 * Creates the indexes, one per command, so that a refused one is named. Throws {@link TransientStoreError} while the store is unreachable (the
 * caller retries) and {@link IndexSetupError} for anything else (the caller stops).
 */
export async function ensureIndexes(db: Db): Promise<void> {
  // Created here, before its `rseq` index, rather than by the first recounts' upserts, which several
  // workers may run at once: another worker creating it at the same moment is not an error here.
  await ensureCollection(db, COLLECTIONS.completionGuards);
  for (const { collection, index } of WORKER_INDEXES) {
    try {
      await db.collection(collection).createIndexes([index]);
    } catch (err) {
      if (isTransientMongoError(err)) throw new TransientStoreError(err);
      throw new IndexSetupError(collection, index.name ?? 'index', err);
    }
  }
  await dropObsolete(db);
}

/** Indexes of earlier releases that the ones above replace: dropped once their replacement exists. */
const OBSOLETE: readonly { readonly collection: string; readonly name: string }[] = [
  { collection: COLLECTIONS.responses, name: 'record_user_unique' },
  // The guard's read by users' hashes, before it read by order (2026-11-27).
  { collection: COLLECTIONS.erasures, name: 'user_hash_seq' },
];

async function dropObsolete(db: Db): Promise<void> {
  for (const { collection, name } of OBSOLETE) {
    try {
      await db.collection(collection).dropIndex(name);
    } catch (err) {
      // IndexNotFound (27) / NamespaceNotFound (26): never created, or dropped by another worker starting at the same time.
      const code = (err as { code?: unknown }).code;
      if (code === 27 || code === 26) continue;
      if (isTransientMongoError(err)) throw new TransientStoreError(err);
      throw new IndexSetupError(collection, name, err);
    }
  }
}

async function ensureCollection(db: Db, name: string): Promise<void> {
  try {
    await db.createCollection(name);
  } catch (err) {
    // NamespaceExists: created earlier, or by another worker starting at the same time.
    if ((err as { code?: unknown }).code === 48) return;
    if (isTransientMongoError(err)) throw new TransientStoreError(err);
    throw new IndexSetupError(name, '_id', err);
  }
}
