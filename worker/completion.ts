import { randomBytes } from 'node:crypto';
import type { AnyBulkWriteOperation, Db } from 'mongodb';
import type { RecordDoc, RecordStatus, ResponseDoc } from '../shared/documents.js';
import { COLLECTIONS } from '../shared/mongo.js';
import type { CompletionRules } from './completion-rules.js';
import { storeCall } from './errors.js';

/** A record whose status the worker changed. */
export type RecordStatusChange = {
  readonly record_id: string;
  readonly dataset_id: string;
  readonly previous: RecordStatus;
} & (
  | { readonly status: 'pending' }
  | {
      readonly status: 'completed';
      /** The acceptance order at which it became completed: the newest submitted response counted (stored as `completed_seq`). */
      readonly seq: number;
    }
);

/** A record found completed by a write of the round that counts it (webhooks' `record.completed`). */
export interface RecordCompletion {
  readonly record_id: string;
  readonly dataset_id: string;
  /** Its `completed_seq`: the order of the write whose storing completed it. */
  readonly seq: number;
}

/** A record a round's responses touched: its dataset, and the orders of the round's writes to it. */
export interface TouchedRecord {
  readonly datasetId: string;
  readonly seqs: readonly number[];
}

/** One store round's part of completion: the token its new records are inserted with, then its recount. */
export interface CompletionRound {
  /**
   * The status and token a new record of this round is inserted with: its status from its first
   * response alone (no other response can exist before the record does), the round's token, and
   * when that is `completed`, `completed_seq` = `seq` (the record write's order). Records of
   * datasets without a rule: `submitted`, no token.
   */
  newRecordFields(datasetId: string, firstResponseStatus: string, seq: number): Pick<RecordDoc, 'status' | 'completion_token' | 'completed_seq'>;
  /**
   * After the round's responses are stored: recounts `touched` (record id → its dataset and the
   * round's writes to it). `fresh` are records this round inserted whose only response in the
   * round is their first one, which it inserted too: their status from {@link newRecordFields}
   * stands unless another worker's recount took the record over meanwhile (then they are recounted).
   */
  finish(touched: ReadonlyMap<string, TouchedRecord>, fresh: ReadonlySet<string>): Promise<void>;
}

export interface CompletionTracker {
  /** A store round's completion: call {@link CompletionRound.finish} once its responses are stored. */
  round(): CompletionRound;
  /**
   * Recounts the status of `records` (record id → dataset id) from their stored responses. Call it
   * after responses are removed (an erasure): records of datasets without a rule are skipped.
   * Throws {@link TransientStoreError} when the store cannot be reached.
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
  /**
   * Called, and awaited, with the records a round finds completed by one of its own writes, before
   * their status is written: those it takes to `completed`, the fresh ones inserted `completed`,
   * and those already `completed` whose `completed_seq` is one of the round's writes (a job run
   * again after a crash). At least once per completion, so that what must not be lost is recorded
   * here (the webhooks' `record.completed`, appended to the outbox; same seq, same event id). A
   * throw fails the round before the status is written, and its job runs again.
   */
  readonly onCompleting?: (completions: readonly RecordCompletion[]) => Promise<void>;
}

/**
 * A record's `status` under its dataset's completion rule (`completed` once `min_submitted`
 * distinct annotators have a submitted response; the unique (record, user_id) index makes
 * responses distinct annotators), kept by the worker as responses are stored.
 *
 * Several workers store responses of the same record at once, so a plain recount-and-write could
 * leave a status counted before another worker's response and written after that worker's. The
 * guard, per store round:
 *
 * 1. after the round's responses are stored, set the record's `completion_token` to the round's
 *    token (one unordered command for the round's records);
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
 *
 * The common case costs less: a record inserted by the round, whose only response in the round is
 * its first one, is inserted with its status from that response alone and with the round's token
 * (the insert is its token write; no response can precede its record). After the round's
 * responses, step 2 reads its token: still ours, then any other worker's response is stored after
 * that read and its worker's token write and count come later still, so the status stands; taken
 * over, it is recounted with steps 1–3 and a new token (the other recount may have counted before
 * the first response was stored).
 *
 * When a record becomes `completed`, step 3 also writes `completed_seq`, the newest order among the
 * submitted responses it counted (a fresh record: its record write's order). Every recount that
 * sees the same stored responses computes the same one, so `record.completed` (whose id carries
 * it) is one event per completion, whichever worker or attempt reports it; going back to pending
 * and completed again gives a new one. {@link CompletionTrackerOptions.onCompleting} is told
 * before the status write, and again by any later round that holds the write of `completed_seq`
 * (the same job run again), so that a crash on either side of the status write loses nothing.
 */
export function createCompletionTracker(options: CompletionTrackerOptions): CompletionTracker {
  const { db, rules } = options;
  const records = db.collection<RecordDoc>(COLLECTIONS.records);
  const responses = db.collection<ResponseDoc>(COLLECTIONS.responses);

  const newToken = () => randomBytes(12).toString('base64url');

  /** The records of `touched` under a rule, with the rule's minimum. */
  function ruled(touched: ReadonlyMap<string, TouchedRecord>): Map<string, number> {
    const minOf = new Map<string, number>();
    for (const [recordId, { datasetId }] of touched) {
      const rule = rules.ruleOf(datasetId);
      if (rule !== undefined) minOf.set(recordId, rule.min_submitted);
    }
    return minOf;
  }

  /**
   * Token, read and count, conditional write, for `recount` ids (see above); `fresh` ids were
   * inserted with `token` and are only read: they keep their status while the token is theirs.
   * Returns the fresh records another recount took over.
   */
  async function settle(token: string, minOf: ReadonlyMap<string, number>, touched: ReadonlyMap<string, TouchedRecord>, recount: readonly string[], fresh: readonly string[]): Promise<string[]> {
    if (recount.length > 0) {
      await storeCall(() => records.bulkWrite(recount.map((_id) => ({ updateOne: { filter: { _id }, update: { $set: { completion_token: token } } } })), { ordered: false }));
    }
    const [held, counts] = await Promise.all([
      storeCall(() => records.find({ _id: { $in: [...recount, ...fresh] } }, { projection: { status: 1, completion_token: 1, completed_seq: 1 } }).toArray()),
      recount.length === 0
        ? Promise.resolve([])
        : storeCall(() =>
            responses
              .aggregate<{ _id: string; n: number; last: number }>([
                { $match: { feedback_record_id: { $in: [...recount] }, status: 'submitted' } },
                { $group: { _id: '$feedback_record_id', n: { $sum: 1 }, last: { $max: '$seq' } } },
              ])
              .toArray(),
          ),
    ]);
    const submitted = new Map(counts.map((c) => [c._id, c]));
    const isFresh = new Set(fresh);
    const changes: RecordStatusChange[] = [];
    const reported: RecordStatusChange[] = [];
    const completions: RecordCompletion[] = [];
    const lost: string[] = [];
    for (const doc of held) {
      const { datasetId, seqs } = touched.get(doc._id)!;
      if (doc.completion_token !== token) {
        // Another recount set its token after ours: the status is its to write. A fresh record's
        // status was set from its first response alone, which that recount may not have seen.
        if (isFresh.has(doc._id)) lost.push(doc._id);
        continue;
      }
      if (isFresh.has(doc._id)) {
        if (doc.status === 'completed' && doc.completed_seq !== undefined) {
          reported.push({ record_id: doc._id, dataset_id: datasetId, previous: 'pending', status: 'completed', seq: doc.completed_seq });
          completions.push({ record_id: doc._id, dataset_id: datasetId, seq: doc.completed_seq });
        }
        continue;
      }
      const count = submitted.get(doc._id);
      if ((count?.n ?? 0) >= minOf.get(doc._id)!) {
        // Completed at the newest submitted version counted: the write whose storing completed it
        // when the responses were stored in their order, and never before a response it counts.
        if (doc.status !== 'completed') changes.push({ record_id: doc._id, dataset_id: datasetId, previous: doc.status, status: 'completed', seq: count!.last });
        else if (doc.completed_seq !== undefined && seqs.includes(doc.completed_seq)) completions.push({ record_id: doc._id, dataset_id: datasetId, seq: doc.completed_seq });
      } else if (doc.status !== 'pending') changes.push({ record_id: doc._id, dataset_id: datasetId, previous: doc.status, status: 'pending' });
    }
    for (const c of changes) if (c.status === 'completed') completions.push({ record_id: c.record_id, dataset_id: c.dataset_id, seq: c.seq });
    // Before the status is written: a round that dies after writing it would find no change on its re-run.
    if (completions.length > 0) await options.onCompleting?.(completions);
    if (changes.length > 0) {
      const ops: AnyBulkWriteOperation<RecordDoc>[] = changes.map((c) => ({
        updateOne: { filter: { _id: c.record_id, completion_token: token }, update: { $set: c.status === 'completed' ? { status: c.status, completed_seq: c.seq } : { status: c.status } } },
      }));
      const result = await storeCall(() => records.bulkWrite(ops, { ordered: false }));
      let written = changes;
      if (result.matchedCount < changes.length) {
        // Some record got a newer token meanwhile (its recount reads the status after it and reports any change).
        const still = await storeCall(() => records.find({ _id: { $in: changes.map((c) => c.record_id) }, completion_token: token }, { projection: { _id: 1 } }).toArray());
        const ours = new Set(still.map((d) => d._id));
        written = changes.filter((c) => ours.has(c.record_id));
      }
      reported.push(...written);
    }
    if (reported.length > 0) await options.onStatusChanged?.(reported);
    return lost;
  }

  async function finish(token: string, touched: ReadonlyMap<string, TouchedRecord>, fresh: ReadonlySet<string>): Promise<void> {
    const minOf = ruled(touched);
    if (minOf.size === 0) return;
    // Sorted: concurrent recounts then lock the records they take in the same order (no deadlock, see updates.ts).
    const recount = [...minOf.keys()].filter((id) => !fresh.has(id)).sort();
    const lost = await settle(token, minOf, touched, recount, [...minOf.keys()].filter((id) => fresh.has(id)));
    if (lost.length > 0) await settle(newToken(), minOf, touched, lost.sort(), []);
  }

  return {
    round() {
      const token = newToken();
      return {
        newRecordFields(datasetId, firstResponseStatus, seq) {
          const rule = rules.ruleOf(datasetId);
          if (rule === undefined) return { status: 'submitted' };
          if (firstResponseStatus === 'submitted' && rule.min_submitted <= 1) return { status: 'completed', completion_token: token, completed_seq: seq };
          return { status: 'pending', completion_token: token };
        },
        finish: (touched, fresh) => finish(token, touched, fresh),
      };
    },
    // No write of the caller's completes a record (an erasure only removes responses).
    recount: (records) => finish(newToken(), new Map([...records].map(([id, datasetId]) => [id, { datasetId, seqs: [] }])), new Set()),
  };
}
