import type { Collection } from 'mongodb';
import type { RecordDoc } from '../shared/documents.js';
import { isTransientMongoError, TransientStoreError } from './errors.js';
import type { StoreProfile } from '../shared/store-profile.js';

interface RecordLookup {
  /** Notes a record as stored (records are never deleted, so the note stays true). */
  remember(recordId: string, datasetId: string): void;
  /** The dataset of each stored record among `recordIds`; records not stored are absent. */
  datasetsOf(recordIds: readonly string[]): Promise<Map<string, string>>;
}

/** Lookups run at once per batch on a store that evaluates `$in` by scanning. */
const LOOKUP_CONCURRENCY = 16;

/**
 * Which records are stored, and their datasets, for the responses of a batch. A bounded memory
 * of records stored or seen keeps the reads off the hot path of annotation traffic, where many
 * responses come for the same records. What is not remembered is read in one `$in` query where
 * the store serves it from an index (MongoDB), else one `_id` lookup per record (FerretDB pushes
 * only those down to its backend).
 */
export function createRecordLookup(options: { records: Collection<RecordDoc>; profile: StoreProfile; capacity: number }): RecordLookup {
  const { records, profile, capacity } = options;
  // A Map keeps insertion order: deleting the first key evicts the oldest entry.
  const known = new Map<string, string>();

  const remember = (recordId: string, datasetId: string) => {
    known.delete(recordId);
    known.set(recordId, datasetId);
    if (known.size > capacity) known.delete(known.keys().next().value!);
  };

  async function read(ids: readonly string[]): Promise<{ _id: string; feedback_dataset_id: string }[]> {
    const projection = { projection: { feedback_dataset_id: 1 } };
    if (profile.indexedIn) return records.find({ _id: { $in: [...ids] } }, projection).toArray();
    const found: { _id: string; feedback_dataset_id: string }[] = [];
    for (let start = 0; start < ids.length; start += LOOKUP_CONCURRENCY) {
      const docs = await Promise.all(ids.slice(start, start + LOOKUP_CONCURRENCY).map((id) => records.findOne({ _id: id }, projection)));
      for (const d of docs) if (d !== null) found.push(d);
    }
    return found;
  }

  return {
    remember,
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
