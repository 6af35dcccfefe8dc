import type { Collection } from 'mongodb';
import type { RecordDoc } from '../shared/documents.js';
import { isTransientMongoError, TransientStoreError } from './errors.js';
import { ROUND_READ_BATCH } from './store-chunks.js';

interface RecordLookup {
  /** Notes a record as stored (true until an erasure removes it: see {@link RecordLookup.forget}). */
  remember(recordId: string, datasetId: string): void;
  /** Drops records an erasure removes from the memory, so that a later response to one is not stored without it. */
  forget(recordIds: readonly string[]): void;
  /** The dataset of each stored record among `recordIds`; records not stored are absent. */
  datasetsOf(recordIds: readonly string[]): Promise<Map<string, string>>;
}

/**
 * Which records are stored, and their datasets, for the responses of a batch. A bounded memory
 * of records stored or seen keeps the reads off the hot path of annotation traffic, where many
 * responses come for the same records. What is not remembered is read in one `$in` query, which
 * the `_id` index serves.
 */
export function createRecordLookup(options: { records: Collection<RecordDoc>; capacity: number }): RecordLookup {
  const { records, capacity } = options;
  // A Map keeps insertion order: deleting the first key evicts the oldest entry.
  const known = new Map<string, string>();

  const remember = (recordId: string, datasetId: string) => {
    known.delete(recordId);
    known.set(recordId, datasetId);
    if (known.size > capacity) known.delete(known.keys().next().value!);
  };

  const read = (ids: readonly string[]) => records.find({ _id: { $in: [...ids] } }, { projection: { feedback_dataset_id: 1 }, batchSize: ROUND_READ_BATCH }).toArray();

  return {
    remember,
    forget(recordIds) {
      for (const id of recordIds) known.delete(id);
    },
    async datasetsOf(recordIds) {
      const out = new Map<string, string>();
      const missing: string[] = [];
      for (const id of new Set(recordIds)) {
        const datasetId = known.get(id);
        if (datasetId === undefined) missing.push(id);
        else out.set(id, datasetId);
      }
      if (missing.length === 0) return out;
      let docs;
      try {
        docs = await read(missing);
      } catch (err) {
        if (isTransientMongoError(err)) throw new TransientStoreError(err);
        throw err;
      }
      for (const d of docs) {
        out.set(d._id, d.feedback_dataset_id);
        remember(d._id, d.feedback_dataset_id);
      }
      return out;
    },
  };
}
