import type { Db, Filter } from 'mongodb';
import type { RecordPage, RecordView } from '../shared/answers.js';
import { recordView } from '../shared/views.js';
import type { RecordDoc, ResponseDoc } from '../shared/documents.js';
import { COLLECTIONS } from '../shared/mongo.js';
import { encodeCursor, type RecordListing } from './read-query.js';
import { submittedUnits, type ResponseUnit, type UnitQuery } from './response-units.js';

/** `updated_since` names more records touched by responses than one listing looks up; see {@link UPDATED_SINCE_MAX_RECORDS}. */
export class TooManyUpdatedRecordsError extends Error {
  constructor(readonly max: number) {
    super(`more than ${max} records of this dataset have responses updated since then`);
    this.name = 'TooManyUpdatedRecordsError';
  }
}

/**
 * Most distinct records whose responses changed since `updated_since` that a listing looks up:
 * their ids go into every page's query (`_id: {$in}`), and 50,000 ids stay far below MongoDB's
 * 16 MB command limit and a few MB of API memory.
 */
export const UPDATED_SINCE_MAX_RECORDS = 50_000;

/** Records per batch of an export: one `$in` for their responses and one driver batch. */
const EXPORT_BATCH_RECORDS = 500;

export interface RecordReader {
  /** The stored record with all its responses, or undefined when it is not stored (yet). */
  getRecord(id: string): Promise<RecordView | undefined>;
  /** One page of a dataset's records, ordered by (`created_at`, `_id`). */
  listRecords(datasetId: string, listing: RecordListing): Promise<RecordPage>;
  /**
   * The dataset as NDJSON lines (record with its responses, `\n`-terminated), in no guaranteed
   * order, pulled from one MongoDB cursor only as fast as the consumer asks. Ending the iteration
   * early (`return()`, as a destroyed stream does) closes the cursor.
   */
  exportDataset(datasetId: string): AsyncGenerator<string, void, undefined>;
  /** A dataset's submitted responses to one question, one record at a time (api/response-units.ts). */
  submittedUnits(query: UnitQuery): AsyncGenerator<ResponseUnit, void, undefined>;
}

interface RecordReaderOptions {
  readonly db: Db;
}

/** Oldest response first, so that a record's responses read in the order annotators gave them. */
function byCreation(a: ResponseDoc, b: ResponseDoc): number {
  return a.created_at.getTime() - b.created_at.getTime() || (a._id < b._id ? -1 : a._id > b._id ? 1 : 0);
}

/** The read side of the store: records and their responses, as the API shows them. Never writes. */
export function createRecordReader(options: RecordReaderOptions): RecordReader {
  const records = options.db.collection<RecordDoc>(COLLECTIONS.records);
  const responses = options.db.collection<ResponseDoc>(COLLECTIONS.responses);
  /** The responses of `recordIds`, by record id: one `$in`, served by the (record, user) index. */
  async function responsesOf(recordIds: readonly string[]): Promise<Map<string, ResponseDoc[]>> {
    const byRecord = new Map<string, ResponseDoc[]>(recordIds.map((id) => [id, []]));
    if (recordIds.length === 0) return byRecord;
    const docs = await responses.find({ feedback_record_id: { $in: [...recordIds] } }).toArray();
    for (const doc of docs) byRecord.get(doc.feedback_record_id)?.push(doc);
    for (const list of byRecord.values()) list.sort(byCreation);
    return byRecord;
  }

  /** Ids of the dataset's records whose responses were created or updated at or after `sinceMs`. */
  async function touchedRecords(datasetId: string, sinceMs: number): Promise<string[]> {
    const ids = new Set<string>();
    const cursor = responses.find({ feedback_dataset_id: datasetId, updated_at: { $gte: new Date(sinceMs) } }, { projection: { _id: 0, feedback_record_id: 1 } });
    try {
      for await (const doc of cursor) {
        ids.add(doc.feedback_record_id);
        if (ids.size > UPDATED_SINCE_MAX_RECORDS) throw new TooManyUpdatedRecordsError(UPDATED_SINCE_MAX_RECORDS);
      }
    } finally {
      await cursor.close();
    }
    return [...ids];
  }

  return {
    submittedUnits: (query) => submittedUnits(responses, query),

    async getRecord(id) {
      const doc = await records.findOne({ _id: id });
      if (doc === null) return undefined;
      return recordView(doc, (await responsesOf([id])).get(id));
    },

    async listRecords(datasetId, listing) {
      const dir = listing.order === 'newest' ? -1 : 1;
      const conditions: Filter<RecordDoc>[] = [{ feedback_dataset_id: datasetId }];
      const after = listing.after;
      if (after !== undefined) {
        // Keyset on (created_at, _id): both are fixed when a record is stored, so a record can
        // neither move behind the cursor (skipped) nor ahead of it again (repeated).
        const at = new Date(after.createdAtMs);
        const beyond = dir === 1 ? '$gt' : '$lt';
        conditions.push({ $or: [{ created_at: { [beyond]: at } }, { created_at: at, _id: { [beyond]: after.id } }] });
      }
      if (listing.updatedSinceMs !== null) {
        const since = new Date(listing.updatedSinceMs);
        const touched = await touchedRecords(datasetId, listing.updatedSinceMs);
        conditions.push({ $or: [{ updated_at: { $gte: since } }, ...(touched.length === 0 ? [] : [{ _id: { $in: touched } }])] });
      }
      const docs = await records
        .find(conditions.length === 1 ? conditions[0]! : { $and: conditions })
        .sort({ created_at: dir, _id: dir })
        .limit(listing.limit + 1)
        .toArray();
      const page = docs.slice(0, listing.limit);
      const byRecord = listing.includeResponses ? await responsesOf(page.map((d) => d._id)) : undefined;
      const last = page[page.length - 1];
      return {
        items: page.map((doc) => recordView(doc, byRecord?.get(doc._id))),
        next_cursor:
          docs.length > listing.limit && last !== undefined
            ? encodeCursor({ order: listing.order, createdAtMs: last.created_at.getTime(), id: last._id, updatedSinceMs: listing.updatedSinceMs, datasetId })
            : null,
      };
    },

    async *exportDataset(datasetId) {
      // No sort: FerretDB would sort the whole dataset in its memory first. One cursor reads one
      // consistent pass over the dataset's records (a record is never changed after its insert).
      const cursor = records.find({ feedback_dataset_id: datasetId }, { batchSize: EXPORT_BATCH_RECORDS });
      try {
        let batch: RecordDoc[] = [];
        for (;;) {
          const doc = await cursor.next();
          if (doc !== null) batch.push(doc);
          // Flush when the driver's batch is used up (the next record needs a getMore) or at the end.
          if (batch.length > 0 && (doc === null || cursor.bufferedCount() === 0 || batch.length >= EXPORT_BATCH_RECORDS)) {
            const byRecord = await responsesOf(batch.map((d) => d._id));
            for (const record of batch) yield `${JSON.stringify(recordView(record, byRecord.get(record._id)))}\n`;
            batch = [];
          }
          if (doc === null) return;
        }
      } finally {
        await cursor.close();
      }
    },
  };
}
