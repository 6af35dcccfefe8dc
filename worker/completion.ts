import { randomBytes } from 'node:crypto';
import type { AnyBulkWriteOperation, Db } from 'mongodb';
import type { RecordDoc, RecordStatus, ResponseDoc } from '../shared/documents.js';
import { COLLECTIONS } from '../shared/mongo.js';
import type { CompletionRules } from './completion-rules.js';
import { isTransientMongoError, TransientStoreError } from './errors.js';

/** A record whose status the worker changed (webhooks' `record.completed` hangs on this). */
export interface RecordStatusChange {
  readonly record_id: string;
  readonly dataset_id: string;
  readonly previous: RecordStatus;
  readonly status: 'pending' | 'completed';
}

export interface CompletionTracker {
  /** The status a new record of the dataset is stored with: `pending` under a rule, else `submitted`. */
  initialStatus(datasetId: string): RecordStatus;
  /**
   * Recounts the status of `records` (record id → dataset id) from their stored responses. Call it
   * after the responses of a store round are written (and after responses are erased): records of
   * datasets without a rule are skipped. Throws {@link TransientStoreError} when the store cannot be
   * reached (the round fails and its jobs run again, which recounts again).
   */
  recount(records: ReadonlyMap<string, string>): Promise<void>;
}

export interface CompletionTrackerOptions {
  readonly db: Db;
  readonly rules: Pick<CompletionRules, 'ruleOf'>;
  /**
   * Called with the records whose status this recount changed, after the change is stored. Once
   * per change as a rule: a worker that dies between the status write and this call does not call
   * it for that change (its job's re-run finds the status already written).
   */
  readonly onStatusChanged?: (changes: readonly RecordStatusChange[]) => void | Promise<void>;
}

function storeCall<T>(call: () => Promise<T>): Promise<T> {
  return call().catch((err: unknown) => {
    if (isTransientMongoError(err)) throw new TransientStoreError(err);
    throw err;
  });
}

/**
 * A record's `status` under its dataset's completion rule (`completed` once `min_submitted`
 * distinct annotators have a submitted response; the unique (record, user_id) index makes
 * responses distinct annotators), kept by the worker as responses are stored.
 *
 * Several workers store responses of the same record at once, so a plain recount-and-write could
 * leave a status counted before another worker's response and written after that worker's. The
 * guard, per recount:
 *
 * 1. after the round's responses are stored, set the record's `completion_token` to a token of
 *    this recount (one unordered command for the round's records);
 * 2. read the records' status and token, and count their submitted responses (one query each);
 * 3. only where the token is still ours and the count gives another status, write the status
 *    with the filter `{_id, completion_token: ours}` (one unordered command).
 *
 * Why that is enough: every stored response is followed by a token write of its worker and then
 * by that worker's count. Take the last token write of a record: its count starts after every
 * response whose token write came before it, that is after every stored response, so it counts
 * them all; and after that token write no other recount can write the status (their filter names
 * an older token). An earlier recount either wrote before that last token write (and is then
 * overwritten, when it differs) or misses. A job run twice, or two workers, or a Redis reset:
 * the status is a function of the stored responses and the rule, whoever counts last.
 */
export function createCompletionTracker(options: CompletionTrackerOptions): CompletionTracker {
  const { db, rules } = options;
  const records = db.collection<RecordDoc>(COLLECTIONS.records);
  const responses = db.collection<ResponseDoc>(COLLECTIONS.responses);

  async function recount(touched: ReadonlyMap<string, string>): Promise<void> {
    const minOf = new Map<string, number>();
    for (const [recordId, datasetId] of touched) {
      const rule = rules.ruleOf(datasetId);
      if (rule !== undefined) minOf.set(recordId, rule.min_submitted);
    }
    if (minOf.size === 0) return;
    const ids = [...minOf.keys()];
    const token = randomBytes(12).toString('base64url');

    await storeCall(() => records.bulkWrite(ids.map((_id) => ({ updateOne: { filter: { _id }, update: { $set: { completion_token: token } } } })), { ordered: false }));
    const [held, counts] = await Promise.all([
      storeCall(() => records.find({ _id: { $in: ids } }, { projection: { status: 1, completion_token: 1 } }).toArray()),
      storeCall(() =>
        responses
          .aggregate<{ _id: string; n: number }>([{ $match: { feedback_record_id: { $in: ids }, status: 'submitted' } }, { $group: { _id: '$feedback_record_id', n: { $sum: 1 } } }])
          .toArray(),
      ),
    ]);
    const submitted = new Map(counts.map((c) => [c._id, c.n]));
    const changes: RecordStatusChange[] = [];
    for (const doc of held) {
      // Another recount set its token after ours: the status is its to write.
      if (doc.completion_token !== token) continue;
      const status = (submitted.get(doc._id) ?? 0) >= minOf.get(doc._id)! ? 'completed' : 'pending';
      if (doc.status !== status) changes.push({ record_id: doc._id, dataset_id: touched.get(doc._id)!, previous: doc.status, status });
    }
    if (changes.length === 0) return;
    const ops: AnyBulkWriteOperation<RecordDoc>[] = changes.map((c) => ({ updateOne: { filter: { _id: c.record_id, completion_token: token }, update: { $set: { status: c.status } } } }));
    const result = await storeCall(() => records.bulkWrite(ops, { ordered: false }));
    let written = changes;
    if (result.matchedCount < changes.length) {
      // Some record got a newer token meanwhile (its recount reads the status after it and reports any change).
      const still = await storeCall(() => records.find({ _id: { $in: changes.map((c) => c.record_id) }, completion_token: token }, { projection: { _id: 1 } }).toArray());
      const ours = new Set(still.map((d) => d._id));
      written = changes.filter((c) => ours.has(c.record_id));
    }
    if (written.length > 0) await options.onStatusChanged?.(written);
  }

  return {
    initialStatus: (datasetId) => (rules.ruleOf(datasetId) === undefined ? 'submitted' : 'pending'),
    recount,
  };
}
