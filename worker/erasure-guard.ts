import type { AnyBulkWriteOperation, Db } from 'mongodb';
import { erasureCollection, userHash, type ErasureDoc } from '../shared/erasures.js';
import type { RecordDoc, ResponseDoc, SuggestionDoc } from '../shared/documents.js';
import { COLLECTIONS } from '../shared/mongo.js';
import { carriesResponse, isRecordWrite, type SequencedWrite } from './documents.js';
import { storeCall } from './errors.js';
import { ROUND_READ_BATCH } from './store-chunks.js';

/*
 * The store round's side of erasure (docs/erasure.md): a write of a user with a tombstone of a
 * higher `seq` is never stored, whatever order, process or attempt brings it. Each round reads the
 * tombstones of its users twice: before storing (to drop what they cover) and after (to remove
 * what it stored under a tombstone inserted meanwhile). The second read is what closes the race
 * with an erasure's sweep: a write stored by a round is either stored before the tombstone
 * exists, and then the sweep (which starts after the tombstone is stored) finds it, or the
 * round's second read (which starts after its writes are acknowledged) finds the tombstone.
 */

/** An erasure as the responses it removes name it (`response.erased`): its id, acceptance order and acceptance time. */
export interface ErasureRef {
  readonly id: string;
  readonly seq: number;
  readonly at: Date;
}

/** What a tombstone says about the writes below its order. */
export interface Tombstone extends ErasureRef {
  readonly datasets: readonly string[] | null;
  readonly records: ErasureDoc['records'];
}

/** The tombstones of the users of one round. */
export interface Tombstones {
  /**
   * The tombstone that covers `item` (its user's, of a higher order, of its dataset), or
   * undefined. `datasetId` undefined (a response whose record is not stored yet) is covered only
   * by a tombstone of every dataset.
   */
  covering(item: SequencedWrite, datasetId: string | undefined): Tombstone | undefined;
}

export const NO_TOMBSTONES: Tombstones = { covering: () => undefined };

/** A response document an erasure removes, with the erasure that removes it. */
export interface ErasedResponse {
  readonly doc: ResponseDoc;
  readonly erasure: ErasureRef;
}

/** Told of response documents an erasure removes. A throw fails the job's attempt, which runs again. */
export type OnErased = (removed: readonly ErasedResponse[]) => void | Promise<void>;

/**
 * The two moments the sweeps (worker/erasures.ts) and the store rounds' guard report the response
 * documents they remove, each time with the erasure that removes them.
 */
export interface ErasureHooks {
  /**
   * Before they are deleted, awaited: a throw leaves them stored, so that the retry of the job
   * finds them and reports them again. What must never be lost is recorded here (the webhook
   * outbox's `response.erased`): after the delete, a retry would no longer find them.
   */
  readonly removing?: OnErased;
  /** After they are deleted (the records' completion recount, `startWorker`'s `onErased`). */
  readonly removed?: OnErased;
  /** Before records an erasure removes are deleted, awaited like `removing` (the outbox's events that carry their fields). */
  readonly removingRecords?: (recordIds: readonly string[]) => Promise<void>;
  /** After records an erasure removes are deleted (the writer forgets it knew them stored). */
  readonly removedRecords?: (recordIds: readonly string[]) => void;
}

export interface ErasureGuard {
  /** The tombstones of the users of `items` above the order of its oldest write (one range of an index); NO_TOMBSTONES when none. */
  tombstones(items: readonly SequencedWrite[]): Promise<Tombstones>;
  /**
   * Removes from the store what the writes `covered` stored (each with its tombstone): a
   * response version below the tombstone, and for a record write under `created` rules the record
   * with every response to it. Idempotent; also run for writes dropped before storing, since an
   * earlier attempt of their job may have stored them.
   */
  remove(covered: readonly { readonly item: SequencedWrite; readonly tombstone: Tombstone }[]): Promise<void>;
}

/** The annotator of a write's response; a suggestion (a model's, by an agent) has none. */
function userOf(item: SequencedWrite): string | undefined {
  return carriesResponse(item) ? item.write.response.user_id : undefined;
}

/**
 * Each document `remove` found, with the tombstone that covers it: its response's write, or its
 * record's write under a `created` rule; of several, the latest (the same choice as `covering`, so
 * that a job run again reports the same erasure).
 */
function erasedBy(docs: readonly ResponseDoc[], covered: readonly { readonly item: SequencedWrite; readonly tombstone: Tombstone }[]): ErasedResponse[] {
  const byResponse = new Map<string, Tombstone>();
  const byRecord = new Map<string, Tombstone>();
  const keepLatest = (map: Map<string, Tombstone>, id: string, t: Tombstone) => {
    const held = map.get(id);
    if (held === undefined || t.seq > held.seq) map.set(id, t);
  };
  for (const { item, tombstone } of covered) {
    if (carriesResponse(item)) keepLatest(byResponse, item.write.response_id, tombstone);
    if (isRecordWrite(item) && tombstone.records !== 'keep') keepLatest(byRecord, item.write.record_id, tombstone);
  }
  return docs.map((doc) => {
    const [a, b] = [byResponse.get(doc._id), byRecord.get(doc.feedback_record_id)];
    const t = a === undefined ? b! : b === undefined || a.seq >= b.seq ? a : b;
    return { doc, erasure: { id: t.id, seq: t.seq, at: t.at } };
  });
}

export function createErasureGuard(options: { readonly db: Db } & ErasureHooks): ErasureGuard {
  const erasures = erasureCollection(options.db);
  const records = options.db.collection<RecordDoc>(COLLECTIONS.records);
  const responses = options.db.collection<ResponseDoc>(COLLECTIONS.responses);
  const suggestions = options.db.collection<SuggestionDoc>(COLLECTIONS.suggestions);

  return {
    async tombstones(items) {
      if (items.length === 0) return NO_TOMBSTONES;
      let lowest = Number.POSITIVE_INFINITY;
      for (const item of items) if (userOf(item) !== undefined && item.seq < lowest) lowest = item.seq;
      if (lowest === Number.POSITIVE_INFINITY) return NO_TOMBSTONES;
      // A tombstone covers only writes below its order, so the round needs those above its oldest
      // write's: one range of the `seq` index, the users matched here. Erasures are rare, so the
      // range holds few (none at all, mostly); the users' `$in` it replaces cost the stand-in
      // ~64 µs of CPU per user even on an empty collection (~64 µs a write at ~1,000 users a
      // round, twice a round: docs/performance.md). The users are hashed only when the range
      // holds a tombstone: a SHA-256 per user and round otherwise spent for nothing.
      const docs = await storeCall(() =>
        erasures.find({ seq: { $gt: lowest } }, { projection: { user_hash: 1, seq: 1, datasets: 1, records: 1, requested_at: 1 }, batchSize: ROUND_READ_BATCH }).toArray(),
      );
      if (docs.length === 0) return NO_TOMBSTONES;
      const hashOf = new Map<string, string>();
      for (const item of items) {
        const user = userOf(item);
        if (user !== undefined && !hashOf.has(user)) hashOf.set(user, userHash(user));
      }
      const hashes = new Set(hashOf.values());
      const byHash = new Map<string, Tombstone[]>();
      for (const d of docs) {
        if (!hashes.has(d.user_hash)) continue;
        const list = byHash.get(d.user_hash) ?? [];
        list.push({ id: d._id, seq: d.seq, at: d.requested_at, datasets: d.datasets, records: d.records });
        byHash.set(d.user_hash, list);
      }
      if (byHash.size === 0) return NO_TOMBSTONES;
      return {
        covering(item, datasetId) {
          const user = userOf(item);
          if (user === undefined) return undefined;
          const list = byHash.get(hashOf.get(user) ?? userHash(user));
          if (list === undefined) return undefined;
          // Every covering tombstone at once: the highest order (what its removal may take, and
          // the erasure its removals are reported with) and the strictest records rule (a
          // `created` erasure covers the record even when a later one keeps records).
          let merged: Tombstone | undefined;
          for (const t of list) {
            if (item.seq >= t.seq) continue;
            if (t.datasets !== null && (datasetId === undefined || !t.datasets.includes(datasetId))) continue;
            const latest = merged === undefined || t.seq > merged.seq ? t : merged;
            merged = merged === undefined ? t : { id: latest.id, seq: latest.seq, at: latest.at, datasets: null, records: merged.records !== 'keep' ? merged.records : t.records };
          }
          return merged;
        },
      };
    },

    async remove(covered) {
      if (covered.length === 0) return;
      const recordIds = covered.filter(({ item, tombstone }) => isRecordWrite(item) && tombstone.records !== 'keep').map(({ item }) => item.write.record_id);
      // Per response id, the highest order a covering tombstone takes: what it stored under any of them.
      const below = new Map<string, number>();
      for (const { item, tombstone } of covered) {
        if (carriesResponse(item)) below.set(item.write.response_id, Math.max(below.get(item.write.response_id) ?? 0, tombstone.seq));
      }
      // Two `$in` queries, each served by an index, and the orders compared here: a `$or` of one
      // branch per response is a collection scan on the stand-in (DocumentDB), whose time grows
      // with branches × documents (5 branches 4.4 s, 50 branches 31 s on ~20,000 responses), and
      // a round of many covered writes then never finished (outside-in check, 2026-11-26).
      const [byId, byRecord] = await Promise.all([
        below.size === 0 ? Promise.resolve([]) : storeCall(() => responses.find({ _id: { $in: [...below.keys()] } }, { batchSize: ROUND_READ_BATCH }).toArray()),
        recordIds.length === 0 ? Promise.resolve([]) : storeCall(() => responses.find({ feedback_record_id: { $in: recordIds } }, { batchSize: ROUND_READ_BATCH }).toArray()),
      ]);
      const docs = [...new Map([...byId.filter((d) => d.seq < below.get(d._id)!), ...byRecord].map((d) => [d._id, d])).values()];
      const removed = erasedBy(docs, covered);
      if (removed.length > 0) {
        await options.removing?.(removed);
        const ops: AnyBulkWriteOperation<ResponseDoc>[] = docs.map((doc) => ({ deleteOne: { filter: { _id: doc._id, seq: doc.seq } } }));
        await storeCall(() => responses.bulkWrite(ops, { ordered: false }));
      }
      if (recordIds.length > 0) {
        // An erased record's suggestions go with it (they describe the user's words).
        await options.removingRecords?.(recordIds);
        await storeCall(() => suggestions.deleteMany({ feedback_record_id: { $in: recordIds } }));
        await storeCall(() => records.deleteMany({ _id: { $in: recordIds } }));
        options.removedRecords?.(recordIds);
      }
      if (removed.length > 0) await options.removed?.(removed);
    },
  };
}
