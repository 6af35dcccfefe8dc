import type { Db, Filter } from 'mongodb';
import type { RecordPage, RecordView } from '../shared/answers.js';
import { byCreation, recordView } from '../shared/views.js';
import { WITHOUT_HISTORY, type RecordDoc, type ResponseDoc, type SuggestionDoc } from '../shared/documents.js';
import { suggestionsOf } from './suggestion-reads.js';
import { COLLECTIONS } from '../shared/mongo.js';
import { encodeCursor, type RecordListing } from './read-query.js';
import { filterDigest, hasResponseFilter, NO_FILTERS, recordConditions, responsesMatch, type RecordFilters } from './record-filters.js';
import { questionAnswered, type ResponseUnit } from './response-units.js';
import { agreementUnits, type AgreementUnitQuery } from './agreement-units.js';

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

/**
 * Most records one listing request with `user_id` or `response_status` looks at: those filters are
 * checked on each record's responses, so a rare match would otherwise scan the whole dataset in
 * one request. A page that reaches this many ends early, with fewer items (possibly none) and a
 * `next_cursor` at the last record looked at.
 */
export const FILTER_SCAN_MAX_RECORDS = 5_000;
/**
 * Most records per round of such a scan (one records query and one `$in` for their responses).
 * The first round reads `limit + 1` records (enough when most records match), each next one four
 * times more, up to this.
 */
const FILTER_SCAN_CHUNK_MAX = 500;

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
  exportDataset(datasetId: string, filters?: RecordFilters): AsyncGenerator<string, void, undefined>;
  /** A dataset's submitted responses to one question, one record at a time (api/response-units.ts), with agents and filters (api/agreement-units.ts). */
  submittedUnits(query: AgreementUnitQuery): AsyncGenerator<ResponseUnit, void, undefined>;
  /** Whether any submitted response of the dataset answers `question`, whatever the agreement's filters (api/response-units.ts). */
  questionAnswered(datasetId: string, question: string): Promise<boolean>;
}

interface RecordReaderOptions {
  readonly db: Db;
}

/** Where a listing stands: the (created_at, _id) of the last record looked at. */
interface Position {
  readonly createdAtMs: number;
  readonly id: string;
}

function positionOf(doc: RecordDoc): Position {
  return { createdAtMs: doc.created_at.getTime(), id: doc._id };
}

/** Records strictly beyond `at` in the order `dir` (1 oldest first, -1 newest first). */
function keysetAfter(at: Position, dir: 1 | -1): Filter<RecordDoc> {
  const time = new Date(at.createdAtMs);
  const beyond = dir === 1 ? '$gt' : '$lt';
  return { $or: [{ created_at: { [beyond]: time } }, { created_at: time, _id: { [beyond]: at.id } }] };
}

/** The read side of the store: records and their responses, as the API shows them. Never writes. */
export function createRecordReader(options: RecordReaderOptions): RecordReader {
  const records = options.db.collection<RecordDoc>(COLLECTIONS.records);
  const responses = options.db.collection<ResponseDoc>(COLLECTIONS.responses);
  const suggestions = options.db.collection<SuggestionDoc>(COLLECTIONS.suggestions);
  /** The responses of `recordIds`, by record id: one `$in`, served by the (record, user) index. */
  async function responsesOf(recordIds: readonly string[]): Promise<Map<string, ResponseDoc[]>> {
    const byRecord = new Map<string, ResponseDoc[]>(recordIds.map((id) => [id, []]));
    if (recordIds.length === 0) return byRecord;
    const docs = await responses.find({ feedback_record_id: { $in: [...recordIds] } }, { projection: WITHOUT_HISTORY }).toArray();
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
    submittedUnits: (query) => agreementUnits({ records, responses, suggestions }, query),
    questionAnswered: (datasetId, question) => questionAnswered(responses, datasetId, question),

    async getRecord(id) {
      const doc = await records.findOne({ _id: id });
      if (doc === null) return undefined;
      const [byRecord, suggested] = await Promise.all([responsesOf([id]), suggestionsOf(suggestions, [id])]);
      return recordView(doc, byRecord.get(id), suggested.get(id));
    },

    async listRecords(datasetId, listing) {
      const dir = listing.order === 'newest' ? -1 : 1;
      const conditions: Filter<RecordDoc>[] = [{ feedback_dataset_id: datasetId }, ...recordConditions(listing.filters)];
      if (listing.updatedSinceMs !== null) {
        const since = new Date(listing.updatedSinceMs);
        const touched = await touchedRecords(datasetId, listing.updatedSinceMs);
        conditions.push({ $or: [{ updated_at: { $gte: since } }, ...(touched.length === 0 ? [] : [{ _id: { $in: touched } }])] });
      }
      /** The records after `after` in the listing's order, at most `limit`. */
      const recordsAfter = (after: Position | undefined, limit: number): Promise<RecordDoc[]> => {
        // Keyset on (created_at, _id): both are fixed when a record is stored, so a record can
        // neither move behind the cursor (skipped) nor ahead of it again (repeated).
        const all = after === undefined ? conditions : [...conditions, keysetAfter(after, dir)];
        return records
          .find(all.length === 1 ? all[0]! : { $and: all })
          .sort({ created_at: dir, _id: dir })
          .limit(limit)
          .toArray();
      };
      const pageCursor = (at: Position) =>
        encodeCursor({ order: listing.order, createdAtMs: at.createdAtMs, id: at.id, updatedSinceMs: listing.updatedSinceMs, datasetId, filterDigest: filterDigest(listing.filters) });

      if (!hasResponseFilter(listing.filters)) {
        const docs = await recordsAfter(listing.after, listing.limit + 1);
        const page = docs.slice(0, listing.limit);
        const byRecord = listing.includeResponses ? await responsesOf(page.map((d) => d._id)) : undefined;
        const last = page[page.length - 1];
        return {
          items: page.map((doc) => recordView(doc, byRecord?.get(doc._id))),
          next_cursor: docs.length > listing.limit && last !== undefined ? pageCursor(positionOf(last)) : null,
        };
      }

      // Response-level filters: walk the records in order, a chunk at a time, and keep those whose
      // responses match, until the page is full (plus one, to know there is more), the dataset
      // ends, or FILTER_SCAN_MAX_RECORDS were looked at.
      const picked: { doc: RecordDoc; responses: ResponseDoc[] | undefined }[] = [];
      let position: Position | undefined = listing.after;
      let scanned = 0;
      let ended = false;
      let chunk = listing.limit + 1;
      while (picked.length <= listing.limit && !ended && scanned < FILTER_SCAN_MAX_RECORDS) {
        const want = Math.min(chunk, FILTER_SCAN_MAX_RECORDS - scanned);
        chunk = Math.min(chunk * 4, FILTER_SCAN_CHUNK_MAX);
        const docs = await recordsAfter(position, want);
        if (docs.length < want) ended = true;
        const byRecord = await responsesOf(docs.map((d) => d._id));
        for (const doc of docs) {
          scanned++;
          position = positionOf(doc);
          if (responsesMatch(listing.filters, byRecord.get(doc._id))) picked.push({ doc, responses: byRecord.get(doc._id) });
          if (picked.length > listing.limit) break;
        }
      }
      const page = picked.slice(0, listing.limit);
      const last = page[page.length - 1];
      const nextAt = picked.length > listing.limit && last !== undefined ? positionOf(last.doc) : ended ? undefined : position;
      return {
        items: page.map(({ doc, responses: list }) => recordView(doc, listing.includeResponses ? list : undefined)),
        next_cursor: nextAt === undefined ? null : pageCursor(nextAt),
      };
    },

    async *exportDataset(datasetId, filters = NO_FILTERS) {
      // Keyset pages in (created_at, _id) order, as the listing reads them: both are fixed when a
      // record is stored, so a record whose status changes while the export runs (a completion
      // rule's recount moves it in the status index, and on the stand-in to a new row) is neither
      // repeated nor skipped. One cursor over the dataset did not promise that (MongoDB returns a
      // document again when it moves in the index the cursor scans). Each page is one query served
      // by an index in this order; response-level filters are checked on each page's responses,
      // which the export fetches anyway.
      const conditions: Filter<RecordDoc>[] = [{ feedback_dataset_id: datasetId }, ...recordConditions(filters)];
      let after: Position | undefined;
      for (;;) {
        const all = after === undefined ? conditions : [...conditions, keysetAfter(after, 1)];
        const page = await records
          .find(all.length === 1 ? all[0]! : { $and: all }, { batchSize: EXPORT_BATCH_RECORDS })
          .sort({ created_at: 1, _id: 1 })
          .limit(EXPORT_BATCH_RECORDS)
          .toArray();
        if (page.length === 0) return;
        const ids = page.map((d) => d._id);
        const [byRecord, suggested] = await Promise.all([responsesOf(ids), suggestionsOf(suggestions, ids)]);
        for (const record of page) {
          const list = byRecord.get(record._id);
          if (responsesMatch(filters, list)) yield `${JSON.stringify(recordView(record, list, suggested.get(record._id)))}\n`;
        }
        if (page.length < EXPORT_BATCH_RECORDS) return;
        after = positionOf(page[page.length - 1]!);
      }
    },
  };
}
