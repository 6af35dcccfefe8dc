import type { AnyBulkWriteOperation, Db } from 'mongodb';
import type { RecordDoc, RecordStatus, ResponseDoc } from '../shared/documents.js';
import { COLLECTIONS } from '../shared/mongo.js';
import { createCompletionGuards } from './completion-guards.js';
import { NO_RULES_READ, withRulesOf, type CompletionRules, type RuleSnapshot } from './completion-rules.js';
import { storeCall } from './errors.js';
import { ROUND_READ_BATCH } from './store-chunks.js';

/** A record the round inserted, as it inserted it: the status it was given and its own `seq` (its guard is found by it). */
type FreshRecord = Pick<RecordDoc, 'status' | 'completed_seq'> & { readonly seq: number };

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
   * The status a new record of this round is inserted with: from its first response alone (no
   * other response can exist before the record does), and when that is `completed`,
   * `completed_seq` = `seq` (the record write's order). Records of datasets without a rule:
   * `submitted`.
   */
  newRecordFields(recordId: string, datasetId: string, firstResponseStatus: string, seq: number): Pick<RecordDoc, 'status' | 'completed_seq'>;
  /**
   * After the round's responses are stored: recounts `touched` (record id → its dataset and the
   * round's writes to it). `fresh` are records this round inserted whose only response in the
   * round is their first one, which it inserted too: their status from {@link newRecordFields}
   * stands unless another worker's recount claimed the record meanwhile (then they are recounted).
   * A recount that could have counted one without its first response claims it, so an unclaimed
   * fresh record still has the status this round gave it: it is not read back.
   */
  finish(touched: ReadonlyMap<string, TouchedRecord>, fresh: ReadonlySet<string>): Promise<void>;
}

export interface CompletionTracker {
  /**
   * A store round's completion, with the rules of `datasetIds` (its new records' datasets) read now,
   * those of other datasets by {@link CompletionRound.finish}, which is called once its responses
   * are stored. Throws {@link TransientStoreError} when the store cannot be reached.
   */
  round(datasetIds: readonly string[]): Promise<CompletionRound>;
  /**
   * Recounts the status of `records` (record id → dataset id) from their stored responses. Call it
   * after responses are removed (an erasure): records of datasets without a rule are skipped.
   * Throws {@link TransientStoreError} when the store cannot be reached.
   */
  recount(records: ReadonlyMap<string, string>): Promise<void>;
}

export interface CompletionTrackerOptions {
  readonly db: Db;
  readonly rules: CompletionRules;
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
 * leave a status counted before another worker's response and written after that worker's
 * recount read the status. Per store round, after its responses are stored:
 *
 * 1. read the records' status and their responses (one query each), and count the submitted ones;
 * 2. where the count gives another status, write it (one unordered command);
 * 3. the check: read the responses of the records written again; where they no longer give the
 *    status written, a response was stored since step 1, whose own recount may have read the
 *    status before this write: those records go through 1–3 again.
 *
 * Why that is enough: let T be the moment the last response of a record is stored (by worker L).
 * L's recount reads the status and the responses after T, so it counts them all. Any status write
 * after L's read is another recount's, whose check reads the responses after that write, so after
 * T: all of them. If what it wrote is not what they give, it recounts and writes again, with a read
 * after T. So the last status write is checked against every response, and if there is none after
 * L's read, L read the last status and counted everything, and wrote what the count gives where the
 * status differed. The status is a function of the stored responses and the rule, whoever counts
 * last (a job run twice, two workers, a Redis reset). A worker that dies between its write and the
 * check leaves its job to run again, which recounts.
 *
 * A record inserted by the round, whose only response in the round is its first one, is inserted
 * with its status from that response alone and is not recounted by that round: any other worker's
 * response is stored after the record was inserted, so its recount reads that status and corrects
 * it, if it counted the first response. For the case where it counted before the first response was
 * stored, the guard (`feedback_completion_guards`, one small document per record, by record id):
 *
 * - a recount that finds a record without a response of its creator (`creator_user_id`: the
 *   annotator of its first response), a "young" record, sets the record's guard to a new token
 *   (claims it), and checks it in step 3 even where it wrote nothing;
 * - the round that inserted the record reads its guard once its responses are stored: claimed, the
 *   record is recounted as above; not claimed, its status stands.
 *
 * If the inserting round read the guard before the claim, the first response was stored before the
 * claim, so before the claiming recount's check, which then sees it and recounts. If after, the
 * inserting round recounts itself, after its first response. The guard lives in its own collection
 * because every update of a record rewrites all of its six index entries on this store (DocumentDB
 * has no in-place update); a guard has its `_id` only. Until 2026-11-26 every recount claimed every
 * record this way and checked the claims, not the responses: ~35 µs of store CPU per recounted
 * record (docs/annotation.md, What it costs the write path).
 *
 * When a record becomes `completed`, step 2 also writes `completed_seq`, the newest order among the
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
  const guards = createCompletionGuards(db);

  /** The records of `touched` under a rule, with the rule's minimum. */
  function ruled(touched: ReadonlyMap<string, TouchedRecord>, held: RuleSnapshot): Map<string, number> {
    const minOf = new Map<string, number>();
    for (const [recordId, { datasetId }] of touched) {
      const rule = held.rules.get(datasetId);
      if (rule !== undefined) minOf.set(recordId, rule.min_submitted);
    }
    return minOf;
  }

  /** Per record, its submitted responses (how many, the newest order) and the annotators who answered it. */
  interface Tally {
    n: number;
    last: number;
    readonly users: Set<string>;
  }

  /**
   * Reads the responses of `ids` and tallies them here: on the stand-in a `$group` of the
   * submitted ones cost the store about 4× the CPU of reading them (bench/completion-costs.ts).
   */
  async function tally(ids: readonly string[]): Promise<Map<string, Tally>> {
    const tallies = new Map<string, Tally>();
    if (ids.length === 0) return tallies;
    const docs = await storeCall(() => responses.find({ feedback_record_id: { $in: [...ids] } }, { projection: { feedback_record_id: 1, user_id: 1, status: 1, seq: 1 }, batchSize: ROUND_READ_BATCH }).toArray());
    for (const r of docs) {
      let t = tallies.get(r.feedback_record_id);
      if (t === undefined) tallies.set(r.feedback_record_id, (t = { n: 0, last: 0, users: new Set() }));
      t.users.add(r.user_id);
      if (r.status !== 'submitted') continue;
      t.n++;
      t.last = Math.max(t.last, r.seq);
    }
    return tallies;
  }

  const completes = (t: Tally | undefined, min: number) => (t?.n ?? 0) >= min;

  /**
   * Read and count, claim the young, write, check (see above) for `recount` ids; `fresh` ids are
   * only read: they keep their status while no recount claimed them. `prior` is the status a
   * record had before an earlier pass of this round wrote it (a change to report, though this pass
   * finds the status already written). Returns the records to settle again: fresh ones claimed by
   * another recount, and those whose responses no longer give the status written (or, young, the
   * status read).
   */
  async function settle(minOf: ReadonlyMap<string, number>, touched: ReadonlyMap<string, TouchedRecord>, recount: readonly string[], fresh: ReadonlyMap<string, FreshRecord>, prior: ReadonlyMap<string, RecordStatus>): Promise<{ again: string[]; prior: Map<string, RecordStatus> }> {
    const [read, submitted, claimedFresh] = await Promise.all([
      recount.length === 0 ? Promise.resolve([]) : storeCall(() => records.find({ _id: { $in: [...recount] } }, { projection: { status: 1, completed_seq: 1, creator_user_id: 1, seq: 1 }, batchSize: ROUND_READ_BATCH }).toArray()),
      tally(recount),
      guards.claimed(fresh),
    ]);
    // Young: no response of its creator is stored, so its first one may still be on its way, in the
    // round that inserted it, which then reads the guard instead of recounting (see above).
    const young = new Set(read.filter((d) => d.creator_user_id !== undefined && submitted.get(d._id)?.users.has(d.creator_user_id) !== true).map((d) => d._id));
    if (young.size > 0) await guards.claim(read.filter((d) => young.has(d._id)).map((d) => ({ id: d._id, seq: d.seq })));
    // Fresh records as this round inserted them, then those read.
    const held: Pick<RecordDoc, '_id' | 'status' | 'completed_seq'>[] = [...[...fresh].map(([_id, fields]) => ({ _id, ...fields })), ...read];
    const changes: RecordStatusChange[] = [];
    const reported: RecordStatusChange[] = [];
    const completions: RecordCompletion[] = [];
    const again: string[] = [];
    /** What each checked record's responses must still give: the status written, or read. */
    const expected = new Map<string, { status: RecordStatus; previous: RecordStatus }>();
    for (const doc of held) {
      const { datasetId, seqs } = touched.get(doc._id)!;
      if (fresh.has(doc._id)) {
        // Another recount claimed it: its status was set from its first response alone, which that recount may not have seen.
        if (claimedFresh.has(doc._id)) again.push(doc._id);
        else if (doc.status === 'completed' && doc.completed_seq !== undefined) {
          reported.push({ record_id: doc._id, dataset_id: datasetId, previous: 'pending', status: 'completed', seq: doc.completed_seq });
          completions.push({ record_id: doc._id, dataset_id: datasetId, seq: doc.completed_seq });
        }
        continue;
      }
      const count = submitted.get(doc._id);
      const previous = prior.get(doc._id) ?? doc.status;
      if (completes(count, minOf.get(doc._id)!)) {
        // Completed at the newest submitted version counted: the write whose storing completed it
        // when the responses were stored in their order, and never before a response it counts.
        const change = { record_id: doc._id, dataset_id: datasetId, previous, status: 'completed', seq: count!.last } as const;
        if (doc.status !== 'completed') changes.push(change);
        else {
          if (doc.completed_seq !== undefined && seqs.includes(doc.completed_seq)) completions.push({ record_id: doc._id, dataset_id: datasetId, seq: doc.completed_seq });
          if (previous !== 'completed') reported.push({ ...change, seq: doc.completed_seq ?? change.seq });
        }
      } else if (doc.status !== 'pending') changes.push({ record_id: doc._id, dataset_id: datasetId, previous, status: 'pending' });
      else if (previous !== 'pending') reported.push({ record_id: doc._id, dataset_id: datasetId, previous, status: 'pending' });
    }
    for (const doc of read) if (young.has(doc._id)) expected.set(doc._id, { status: doc.status, previous: prior.get(doc._id) ?? doc.status });
    for (const c of changes) expected.set(c.record_id, { status: c.status, previous: c.previous });
    for (const c of changes) if (c.status === 'completed') completions.push({ record_id: c.record_id, dataset_id: c.dataset_id, seq: c.seq });
    // Before the status is written: a round that dies after writing it would find no change on its re-run.
    if (completions.length > 0) await options.onCompleting?.(completions);
    const nextPrior = new Map<string, RecordStatus>();
    if (changes.length > 0) {
      const ops: AnyBulkWriteOperation<RecordDoc>[] = changes.map((c) => ({
        updateOne: { filter: { _id: c.record_id }, update: { $set: c.status === 'completed' ? { status: c.status, completed_seq: c.seq } : { status: c.status } } },
      }));
      await storeCall(() => records.bulkWrite(ops, { ordered: false }));
    }
    if (expected.size > 0) {
      // The check: the responses read again, after the write. Where they no longer give the status
      // written (a response stored since the count, whose own recount may have read the status
      // before this write), the record is settled again.
      const now = await tally([...expected.keys()]);
      const failed = new Set<string>();
      for (const [id, e] of expected) {
        if ((completes(now.get(id), minOf.get(id)!) ? 'completed' : 'pending') === e.status) continue;
        failed.add(id);
        again.push(id);
        nextPrior.set(id, e.previous);
      }
      for (const c of changes) if (!failed.has(c.record_id)) reported.push(c);
    }
    if (reported.length > 0) await options.onStatusChanged?.(reported);
    return { again, prior: nextPrior };
  }

  async function finish(touched: ReadonlyMap<string, TouchedRecord>, fresh: ReadonlyMap<string, FreshRecord>, held: RuleSnapshot): Promise<void> {
    const minOf = ruled(touched, await withRulesOf(rules, [...touched.values()].map((t) => t.datasetId), held));
    if (minOf.size === 0) return;
    const recount = [...minOf.keys()].filter((id) => !fresh.has(id)).sort();
    let pass = await settle(minOf, touched, recount, new Map([...fresh].filter(([id]) => minOf.has(id))), new Map());
    // Each pass again follows responses stored by another worker meanwhile: it ends when they do.
    while (pass.again.length > 0) pass = await settle(minOf, touched, pass.again.sort(), new Map(), pass.prior);
  }

  return {
    async round(datasetIds) {
      const held = await withRulesOf(rules, datasetIds, NO_RULES_READ);
      // The status each record of the round was given for its insert.
      const given = new Map<string, FreshRecord>();
      const fieldsOf = (datasetId: string, firstResponseStatus: string, seq: number): Pick<RecordDoc, 'status' | 'completed_seq'> => {
        const rule = held.rules.get(datasetId);
        if (rule === undefined) return { status: 'submitted' };
        if (firstResponseStatus === 'submitted' && rule.min_submitted <= 1) return { status: 'completed', completed_seq: seq };
        return { status: 'pending' };
      };
      return {
        newRecordFields(recordId, datasetId, firstResponseStatus, seq) {
          const fields = fieldsOf(datasetId, firstResponseStatus, seq);
          given.set(recordId, { ...fields, seq });
          return fields;
        },
        finish: (touched, fresh) => finish(touched, new Map([...fresh].flatMap((id) => (given.has(id) ? [[id, given.get(id)!] as const] : []))), held),
      };
    },
    // No write of the caller's completes a record (an erasure only removes responses).
    recount: (records) => finish(new Map([...records].map(([id, datasetId]) => [id, { datasetId, seqs: [] }])), new Map(), NO_RULES_READ),
  };
}
