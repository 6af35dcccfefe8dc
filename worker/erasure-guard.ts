import type { AnyBulkWriteOperation, Db, Filter } from 'mongodb';
import { erasureCollection, userHash, type ErasureDoc } from '../shared/erasures.js';
import type { RecordDoc, ResponseDoc, SuggestionDoc } from '../shared/documents.js';
import { COLLECTIONS } from '../shared/mongo.js';
import { carriesResponse, isRecordWrite, type SequencedWrite } from './documents.js';
import { isTransientMongoError, TransientStoreError } from './errors.js';

/*
 * The store round's side of erasure (docs/erasure.md): a write of a user with a tombstone of a
 * higher `seq` is never stored, whatever order, process or attempt brings it. Each round reads the
 * tombstones of its users twice: before storing (to drop what they cover) and after (to remove
 * what it stored under a tombstone inserted meanwhile). The second read is what closes the race
 * with an erasure's sweep: a write stored by a round is either stored before the tombstone
 * exists, and then the sweep (which starts after the tombstone is stored) finds it, or the
 * round's second read (which starts after its writes are acknowledged) finds the tombstone.
 */

/** What a tombstone says about the writes below its order. */
export interface Tombstone {
  readonly seq: number;
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

/** Called with the response documents an erasure removed (the webhooks' `response.erased`). */
export type OnErased = (responses: readonly ResponseDoc[]) => void | Promise<void>;

export interface ErasureGuard {
  /** The tombstones of the users of `items` (one indexed query); NO_TOMBSTONES when none. */
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

async function storeCall<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    if (isTransientMongoError(err)) throw new TransientStoreError(err);
    throw err;
  }
}

export function createErasureGuard(options: { readonly db: Db; readonly onErased?: OnErased }): ErasureGuard {
  const erasures = erasureCollection(options.db);
  const records = options.db.collection<RecordDoc>(COLLECTIONS.records);
  const responses = options.db.collection<ResponseDoc>(COLLECTIONS.responses);
  const suggestions = options.db.collection<SuggestionDoc>(COLLECTIONS.suggestions);

  return {
    async tombstones(items) {
      if (items.length === 0) return NO_TOMBSTONES;
      const hashOf = new Map<string, string>();
      for (const item of items) {
        const user = userOf(item);
        if (user !== undefined && !hashOf.has(user)) hashOf.set(user, userHash(user));
      }
      if (hashOf.size === 0) return NO_TOMBSTONES;
      const docs = await storeCall(() =>
        erasures.find({ user_hash: { $in: [...new Set(hashOf.values())] } }, { projection: { user_hash: 1, seq: 1, datasets: 1, records: 1 } }).toArray(),
      );
      if (docs.length === 0) return NO_TOMBSTONES;
      const byHash = new Map<string, Tombstone[]>();
      for (const d of docs) {
        const list = byHash.get(d.user_hash) ?? [];
        list.push({ seq: d.seq, datasets: d.datasets, records: d.records });
        byHash.set(d.user_hash, list);
      }
      return {
        covering(item, datasetId) {
          const user = userOf(item);
          if (user === undefined) return undefined;
          const list = byHash.get(hashOf.get(user) ?? userHash(user));
          if (list === undefined) return undefined;
          // Every covering tombstone at once: the highest order (what its removal may take) and
          // the strictest records rule (a `created` erasure covers the record even when a later one keeps records).
          let merged: Tombstone | undefined;
          for (const t of list) {
            if (item.seq >= t.seq) continue;
            if (t.datasets !== null && (datasetId === undefined || !t.datasets.includes(datasetId))) continue;
            merged = merged === undefined ? t : { seq: Math.max(merged.seq, t.seq), datasets: null, records: merged.records !== 'keep' ? merged.records : t.records };
          }
          return merged;
        },
      };
    },

    async remove(covered) {
      if (covered.length === 0) return;
      const recordIds = covered.filter(({ item, tombstone }) => isRecordWrite(item) && tombstone.records !== 'keep').map(({ item }) => item.write.record_id);
      const responseFilters: Filter<ResponseDoc>[] = covered.flatMap(({ item, tombstone }) => (carriesResponse(item) ? [{ _id: item.write.response_id, seq: { $lt: tombstone.seq } }] : []));
      const filter: Filter<ResponseDoc> = recordIds.length === 0 ? { $or: responseFilters } : { $or: [...responseFilters, { feedback_record_id: { $in: recordIds } }] };
      const removed = await storeCall(() => responses.find(filter).toArray());
      if (removed.length > 0) {
        const ops: AnyBulkWriteOperation<ResponseDoc>[] = removed.map((doc) => ({ deleteOne: { filter: { _id: doc._id, seq: doc.seq } } }));
        await storeCall(() => responses.bulkWrite(ops, { ordered: false }));
      }
      if (recordIds.length > 0) {
        // An erased record's suggestions go with it (they describe the user's words).
        await storeCall(() => suggestions.deleteMany({ feedback_record_id: { $in: recordIds } }));
        await storeCall(() => records.deleteMany({ _id: { $in: recordIds } }));
      }
      if (removed.length > 0) await options.onErased?.(removed);
    },
  };
}
