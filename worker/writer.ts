import { MongoBulkWriteError, type AnyBulkWriteOperation, type Db } from 'mongodb';
import { COLLECTIONS } from '../shared/mongo.js';
import type { Logger } from '../shared/logger.js';
import type { RecordWrite, Write } from '../shared/schemas.js';
import { isDuplicateKey, isTransientMongoError, TransientStoreError } from './errors.js';

/** A validated write with its place in the acceptance order. */
export interface SequencedWrite {
  readonly write: Write;
  readonly seq: number;
  readonly index: number;
}

export interface WriteOutcome {
  /** Records newly stored or found already stored. */
  readonly records: number;
  /** Responses stored or updated. */
  readonly responses: number;
  /** Response updates skipped because a later-accepted one is already stored. */
  readonly stale: number;
  /** Responses whose record is not stored yet (still queued in another job). */
  readonly deferred: readonly SequencedWrite[];
  /** Writes MongoDB refuses for good, with its reason. */
  readonly rejected: readonly { readonly item: SequencedWrite; readonly error: string }[];
}

export interface RecordDoc {
  _id: string;
  feedback_dataset_id: string;
  field_to_value: Record<string, unknown>;
  external_id?: string;
  metadata?: Record<string, unknown>;
  status: 'submitted';
  api_key: string;
  request_id: string;
  created_at: Date;
  updated_at: Date;
}

export interface ResponseDoc {
  _id: string;
  feedback_record_id: string;
  feedback_dataset_id: string;
  user_id: string;
  status: string;
  values: Record<string, unknown>;
  /** Acceptance order of the update now stored; an update with a lower seq never replaces it. */
  seq: number;
  api_key: string;
  request_id: string;
  created_at: Date;
  updated_at: Date;
}

export interface FeedbackWriter {
  ensureIndexes(): Promise<void>;
  /** Stores a batch; throws {@link TransientStoreError} when MongoDB cannot be reached. */
  write(items: readonly SequencedWrite[]): Promise<WriteOutcome>;
}

function rethrowTransient(err: unknown): void {
  if (isTransientMongoError(err)) throw new TransientStoreError(err);
}

function recordDoc(w: RecordWrite): RecordDoc {
  const at = new Date(w.accepted_at);
  return {
    _id: w.record_id,
    feedback_dataset_id: w.record.feedback_dataset_id,
    field_to_value: w.record.field_to_value,
    ...(w.record.external_id === undefined ? {} : { external_id: w.record.external_id }),
    ...(w.record.metadata === undefined ? {} : { metadata: w.record.metadata }),
    status: 'submitted',
    api_key: w.api_key,
    request_id: w.request_id,
    created_at: at,
    updated_at: at,
  };
}

function responseOp(item: SequencedWrite, datasetId: string): AnyBulkWriteOperation<ResponseDoc> {
  const w = item.write;
  const at = new Date(w.accepted_at);
  // Matches only a stored update accepted earlier. When a later one is stored, the filter misses,
  // the upsert tries to insert the same _id and fails with 11000: the stale update is dropped.
  // Running the same job twice is therefore harmless too (equal seq also misses).
  return {
    updateOne: {
      filter: { _id: w.response_id, seq: { $lt: item.seq } },
      update: {
        $set: { status: w.response.status, values: w.response.values, seq: item.seq, api_key: w.api_key, request_id: w.request_id, updated_at: at },
        $setOnInsert: { feedback_record_id: w.record_id, feedback_dataset_id: datasetId, user_id: w.response.user_id, created_at: at },
      },
      upsert: true,
    },
  };
}

/**
 * The MongoDB side of the worker. Fast path: one insertMany for new records and one bulkWrite
 * for responses per batch. When a batch errs (a rerun meets its own documents, a stale update, a
 * document the store refuses), it falls back to one operation per document, because FerretDB
 * stops a batch at the first error and its error indexes cannot be trusted; every operation is
 * idempotent, so repeating the ones that did apply changes nothing.
 */
export function createFeedbackWriter(options: { db: Db; logger: Logger }): FeedbackWriter {
  const records = options.db.collection<RecordDoc>(COLLECTIONS.records);
  const responses = options.db.collection<ResponseDoc>(COLLECTIONS.responses);
  const log = options.logger;

  async function insertRecords(items: SequencedWrite[], rejected: { item: SequencedWrite; error: string }[]): Promise<Set<string>> {
    const ok = new Set<string>();
    if (items.length === 0) return ok;
    const docs = items.map((i) => recordDoc(i.write as RecordWrite));
    try {
      await records.insertMany(docs, { ordered: false });
      for (const d of docs) ok.add(d._id);
      return ok;
    } catch (err) {
      rethrowTransient(err);
      if (!(err instanceof MongoBulkWriteError) && !isDuplicateKey(err)) log.debug({ err: (err as Error).message }, 'record batch failed; retrying one by one');
    }
    for (const [n, doc] of docs.entries()) {
      try {
        await records.insertOne(doc);
        ok.add(doc._id);
      } catch (err) {
        if (isDuplicateKey(err)) ok.add(doc._id);
        else {
          rethrowTransient(err);
          rejected.push({ item: items[n]!, error: (err as Error).message });
        }
      }
    }
    return ok;
  }

  async function upsertResponses(ops: { item: SequencedWrite; datasetId: string }[], rejected: { item: SequencedWrite; error: string }[]): Promise<{ applied: number; stale: number }> {
    if (ops.length === 0) return { applied: 0, stale: 0 };
    try {
      const result = await responses.bulkWrite(ops.map((o) => responseOp(o.item, o.datasetId)), { ordered: false });
      return { applied: result.upsertedCount + result.matchedCount, stale: 0 };
    } catch (err) {
      rethrowTransient(err);
    }
    let applied = 0;
    let stale = 0;
    for (const o of ops) {
      const op = responseOp(o.item, o.datasetId);
      if (!('updateOne' in op)) continue;
      try {
        await responses.updateOne(op.updateOne.filter, op.updateOne.update, { upsert: true });
        applied++;
      } catch (err) {
        if (isDuplicateKey(err)) stale++;
        else {
          rethrowTransient(err);
          rejected.push({ item: o.item, error: (err as Error).message });
        }
      }
    }
    return { applied, stale };
  }

  return {
    async ensureIndexes() {
      try {
        await records.createIndexes([
          { key: { feedback_dataset_id: 1, created_at: 1 }, name: 'dataset_created' },
          { key: { feedback_dataset_id: 1, external_id: 1 }, name: 'dataset_external_id' },
        ]);
        await responses.createIndexes([
          { key: { feedback_record_id: 1, user_id: 1 }, name: 'record_user_unique', unique: true },
          { key: { feedback_dataset_id: 1, updated_at: 1 }, name: 'dataset_updated' },
        ]);
        await options.db.collection(COLLECTIONS.deadLetters).createIndexes([{ key: { failed_at: 1 }, name: 'failed_at' }]);
      } catch (err) {
        rethrowTransient(err);
        throw err;
      }
    },

    async write(items) {
      const rejected: { item: SequencedWrite; error: string }[] = [];
      const recordItems = items.filter((i) => i.write.kind === 'record');
      const storedRecords = await insertRecords(recordItems, rejected);

      // The newest update per response id is enough: older ones in the same batch would lose.
      const latest = new Map<string, SequencedWrite>();
      for (const item of items) {
        if (item.write.kind === 'record' && !storedRecords.has(item.write.record_id)) continue;
        const prev = latest.get(item.write.response_id);
        if (prev === undefined || prev.seq < item.seq) latest.set(item.write.response_id, item);
      }
      const superseded = items.filter((i) => i.write.kind === 'response' || storedRecords.has(i.write.record_id)).length - latest.size;

      const datasetOf = new Map<string, string>();
      for (const i of recordItems) {
        const w = i.write as RecordWrite;
        datasetOf.set(w.record_id, w.record.feedback_dataset_id);
      }
      const unknown = [...new Set([...latest.values()].map((i) => i.write.record_id).filter((id) => !datasetOf.has(id)))];
      if (unknown.length > 0) {
        try {
          const found = await records.find({ _id: { $in: unknown } }, { projection: { feedback_dataset_id: 1 } }).toArray();
          for (const r of found) datasetOf.set(r._id, r.feedback_dataset_id);
        } catch (err) {
          rethrowTransient(err);
          throw err;
        }
      }
      const deferred: SequencedWrite[] = [];
      const ops: { item: SequencedWrite; datasetId: string }[] = [];
      for (const item of latest.values()) {
        const datasetId = datasetOf.get(item.write.record_id);
        if (datasetId === undefined) deferred.push(item);
        else ops.push({ item, datasetId });
      }
      const { applied, stale } = await upsertResponses(ops, rejected);
      return { records: storedRecords.size, responses: applied, stale: stale + superseded, deferred, rejected };
    },
  };
}
