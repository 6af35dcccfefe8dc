import type { Db } from 'mongodb';
import { createGroupCommit } from '../shared/group-commit.js';
import type { Logger } from '../shared/logger.js';
import { COLLECTIONS } from '../shared/mongo.js';
import {
  isRecordWrite,
  isResponseWrite,
  isSuggestionWrite,
  carriesResponse,
  recordDoc,
  type SequencedWrite,
} from './documents.js';
import type { RecordDoc, ResponseDoc, SuggestionDoc } from '../shared/documents.js';
import { createResponseRound, type ResponseNotes } from './response-round.js';
import { DEFERRED, ERASED, STORED, type WriteResult } from './write-result.js';
import { createSuggestionRound, type SuggestionChange } from './suggestions.js';
import { insertNew } from './inserts.js';
import { createRecordLookup } from './record-lookup.js';
import type { CompletionRound, CompletionTracker, TouchedRecord } from './completion.js';
import { NO_TOMBSTONES, type ErasureGuard, type Tombstone } from './erasure-guard.js';
import type { RoundEvents } from './round-events.js';
import { ROUND_DEADLINE_MS, watchRound, type RoundStep } from './round-watch.js';

/** What a round stored, for its webhook events (worker/round-events.ts); kept only while some endpoint is subscribed. */
interface RoundNotes extends ResponseNotes {
  /** Record writes whose record is stored, with the document the round inserted (its completion status included). */
  records: { index: number; doc: RecordDoc }[];
}

export type { WriteResult } from './write-result.js';

export interface FeedbackWriter {
  /**
   * Stores a job's writes and says what became of each, in order. Throws TransientStoreError
   * when the store cannot be reached. Jobs that call while a store round is running are merged
   * into the next round, so concurrent jobs share their store commands.
   */
  write(items: readonly SequencedWrite[]): Promise<WriteResult[]>;
  /**
   * True while the writer works through a backlog: a round of at least {@link BACKLOG_ROUND_WRITES}
   * writes runs or ended less than {@link BUSY_AFTER_MS} ago. Rounds are that large only when
   * writes wait in the queue (a burst); under a steady load the worker keeps up with small rounds.
   */
  busy(): boolean;
  /**
   * Records an erasure removes (in this process): the writer forgets it knew them stored, so that
   * a response to one arriving later is not stored without its record. Another worker process's
   * memory of them lasts until it evicts them (docs/erasure.md, Not guaranteed).
   */
  forgetRecords(recordIds: readonly string[]): void;
}

/** A round this large means writes are waiting for the worker (jobs merge into rounds of up to 2,000). */
export const BACKLOG_ROUND_WRITES = 200;
/** How long after such a round the writer still counts as busy, ms. */
export const BUSY_AFTER_MS = 250;

interface FeedbackWriterOptions {
  readonly db: Db;
  readonly logger: Logger;
  /** Most writes per store round. Default 2000. */
  readonly maxBatchWrites?: number;
  /** A store step of a round (not a wait for earlier rounds) taking this long gives the round up as an outage (worker/round-watch.ts). Default ROUND_DEADLINE_MS; the worker gives twice its sockets' timeout. */
  readonly roundDeadlineMs?: number;
  /** Records remembered as stored, so their responses need no read. Default 100000. */
  readonly recordCacheSize?: number;
  /** Keeps records' completion status (worker/completion.ts); absent = records stay `submitted`. */
  readonly completion?: CompletionTracker;
  /** Earlier versions kept per response (RESPONSE_HISTORY_MAX); 0 = no history. Default 0. */
  readonly historyMax?: number;
  /** Called with the suggestion versions each round stored (the webhooks' outbox, issue 24); must not throw. */
  readonly onSuggestionsStored?: (changes: readonly SuggestionChange[]) => void;
  /** Drops and removes writes that an erasure accepted after them covers; absent = no erasures (the benchmark's stores). */
  readonly erasures?: ErasureGuard;
  /** Webhook events of each round, appended before the round's jobs complete; absent = none. */
  readonly events?: RoundEvents;
}


export function createFeedbackWriter(options: FeedbackWriterOptions): FeedbackWriter {
  const { db, logger } = options;
  const records = db.collection<RecordDoc>(COLLECTIONS.records);
  const responses = db.collection<ResponseDoc>(COLLECTIONS.responses);
  const lookup = createRecordLookup({ records, capacity: options.recordCacheSize ?? 100_000 });
  const responseRound = createResponseRound({ responses, logger, historyMax: options.historyMax ?? 0 });
  const suggestionRound = createSuggestionRound({ suggestions: db.collection<SuggestionDoc>(COLLECTIONS.suggestions), onStored: options.onSuggestionsStored });

  /**
   * One store round: records, then for each response the newest version the batch holds. When
   * the store refuses that version for good, the next older one is tried, so a bad update never
   * erases an older valid one.
   */
  /**
   * `earlier` settles when every round started before this one has ended; `turn` gives this round
   * its turn to write responses and suggestions (after the round before it wrote its own), and
   * `done` passes the turn on. `events` is the same for webhook events: a round appends its events
   * (and its record.completed) once the round before it appended its own, and `eventsDone` passes
   * that turn on.
   */
  async function store(items: readonly SequencedWrite[], earlier: Promise<unknown>, turn: Promise<unknown>, done: () => void, events: Promise<unknown>, eventsDone: () => void, at: RoundStep): Promise<WriteResult[]> {
    const results: (WriteResult | undefined)[] = new Array<WriteResult | undefined>(items.length);
    const guard = options.erasures;
    at.enter('tombstones');
    // The completion rules of the round's new records' datasets are read beside the tombstones.
    const [before, completion] = await Promise.all([
      guard === undefined ? NO_TOMBSTONES : guard.tombstones(items),
      options.completion?.round(items.filter(isRecordWrite).map((i) => i.write.record.feedback_dataset_id)),
    ]);
    const coveredBefore = new Map<number, Tombstone>();
    for (const [i, item] of items.entries()) {
      if (!isRecordWrite(item)) continue;
      const t = before.covering(item, item.write.record.feedback_dataset_id);
      if (t === undefined) continue;
      coveredBefore.set(i, t);
      // The record too, unless the erasure keeps records: then it is stored without its response.
      if (t.records !== 'keep') results[i] = ERASED;
    }
    const notes: RoundNotes | undefined = options.events?.active() === true ? { records: [], insertedResponses: [], maybeStored: [] } : undefined;
    // Records of this round are known once inserted; the others are looked up meanwhile.
    const inRound = new Set(items.filter(isRecordWrite).map((i) => i.write.record_id));
    const inserted = new Set<string>();
    at.enter('records');
    const [, datasets] = await Promise.all([
      storeRecords(items, results, completion, inserted, notes),
      lookup.datasetsOf(items.filter((i) => !isRecordWrite(i)).map((i) => i.write.record_id).filter((id) => !inRound.has(id))),
    ]);
    for (const [i, item] of items.entries()) {
      if (isRecordWrite(item) && results[i] === undefined) datasets.set(item.write.record_id, item.write.record.feedback_dataset_id);
    }
    // Records not found may be in the round still running beside this one: once it is done, they
    // are stored (and remembered), so look again before deferring their responses to a retry.
    const missing = [...new Set(items.filter((i) => !isRecordWrite(i) && !datasets.has(i.write.record_id)).map((i) => i.write.record_id))];
    if (missing.length > 0) {
      at.wait('earlier rounds');
      await earlier;
      at.enter('records again');
      for (const [id, datasetId] of await lookup.datasetsOf(missing)) datasets.set(id, datasetId);
    }
    for (const [i, item] of items.entries()) {
      if (isRecordWrite(item) && coveredBefore.has(i)) results[i] = ERASED;
      if (!isResponseWrite(item)) continue;
      const t = before.covering(item, datasets.get(item.write.record_id));
      if (t !== undefined) {
        coveredBefore.set(i, t);
        results[i] = ERASED;
      } else if (!datasets.has(item.write.record_id)) results[i] = DEFERRED;
    }

    // Suggestions go in their own commands beside the responses' (worker/suggestions.ts).
    // In the rounds' order: versions of a response in consecutive rounds are written in acceptance
    // order, so each finds the one before it stored and keeps it in the history.
    at.wait('responses turn');
    await turn;
    at.enter('responses');
    const [suggested] = await Promise.all([suggestionRound.store(items, datasets, (i) => results[i] === undefined), responseRound.store(items, results, datasets, notes)]).finally(done);
    for (const [i, outcome] of suggested) {
      if (isSuggestionWrite(items[i]!)) results[i] = outcome.kind === 'stale' ? { kind: 'stale', newer: undefined } : outcome;
      else if (outcome.kind === 'rejected' && results[i]?.kind !== 'rejected') results[i] = outcome;
    }
    at.enter('erasure check');
    if (guard !== undefined) await removeCovered(guard, items, datasets, results, coveredBefore);
    if (notes !== undefined) {
      // In the rounds' order: a record's events appended by the round after this one (an update of
      // a response this round created) must not become visible before this round's, or the
      // dispatcher would send the later one and drop the earlier as older (worker/event-outbox.ts).
      at.wait('events turn');
      await events;
      at.enter('events');
      // No event for a write an erasure removed again after the round stored it.
      const kept = (list: number[]) => list.filter((i) => results[i]?.kind !== 'erased');
      await options.events!.emit({ items, records: notes.records.filter((r) => results[r.index]?.kind !== 'erased'), insertedResponses: kept(notes.insertedResponses), maybeStored: kept(notes.maybeStored) });
    }
    // After the round's events: a record.completed appended (and sent) before the events of the
    // responses it counts would make them look older than a delivered event of their record.
    at.enter('completion');
    if (completion !== undefined) await completion.finish(...touchedRecords(items, results, datasets, inserted));
    eventsDone();
    return results.map((r, i) => {
      if (r === undefined) throw new Error(`writer left write ${i} of its round undecided`);
      // A record whose first response lost to a later version of it is stored all the same.
      return r.kind === 'stale' && isRecordWrite(items[i]!) ? STORED : r;
    });
  }

  /**
   * After the round: its users' tombstones again, and whatever they cover is removed, stored by
   * this round under a tombstone inserted meanwhile, or by an earlier attempt of a job.
   */
  async function removeCovered(guard: ErasureGuard, items: readonly SequencedWrite[], datasets: ReadonlyMap<string, string>, results: (WriteResult | undefined)[], coveredBefore: ReadonlyMap<number, Tombstone>): Promise<void> {
    const after = await guard.tombstones(items);
    const covered: { item: SequencedWrite; tombstone: Tombstone }[] = [];
    for (const [i, item] of items.entries()) {
      const datasetId = isRecordWrite(item) ? item.write.record.feedback_dataset_id : datasets.get(item.write.record_id);
      const tombstone = after.covering(item, datasetId) ?? coveredBefore.get(i);
      if (tombstone === undefined) continue;
      covered.push({ item, tombstone });
      results[i] = ERASED;
    }
    await guard.remove(covered);
  }

  /**
   * For the round's completion: the records of every response of the round that reached the store
   * (stored, or stale against a later version: a job run again after a crash recounts too, so a
   * status is never left behind by a response stored in a round that died before its recount),
   * each with the orders of those writes (a re-run reports the completion one of them made again);
   * and the fresh ones, inserted by this round with their first response as their only response
   * of the round (their status was set at insert, see worker/completion.ts).
   */
  function touchedRecords(items: readonly SequencedWrite[], results: readonly (WriteResult | undefined)[], datasets: ReadonlyMap<string, string>, inserted: ReadonlySet<string>): [Map<string, TouchedRecord>, Set<string>] {
    const touched = new Map<string, { datasetId: string; seqs: number[] }>();
    for (const [i, item] of items.entries()) {
      const datasetId = datasets.get(item.write.record_id);
      // A suggestion changes no completion status.
      if (datasetId === undefined || !carriesResponse(item) || results[i]?.kind === 'deferred') continue;
      const record = touched.get(item.write.record_id);
      if (record === undefined) touched.set(item.write.record_id, { datasetId, seqs: [item.seq] });
      else record.seqs.push(item.seq);
    }
    const fresh = new Set<string>();
    for (const [i, item] of items.entries()) {
      const id = item.write.record_id;
      if (isRecordWrite(item) && inserted.has(id) && touched.get(id)?.seqs.length === 1 && results[i]?.kind === 'stored') fresh.add(id);
    }
    return [touched, fresh];
  }

  async function storeRecords(items: readonly SequencedWrite[], results: (WriteResult | undefined)[], completion: CompletionRound | undefined, inserted: Set<string>, notes: RoundNotes | undefined): Promise<void> {
    const at = items.flatMap((item, i) => (isRecordWrite(item) && results[i] === undefined ? [{ i, item }] : []));
    const docOf = (item: (typeof at)[number]['item']) => {
      const doc = recordDoc(item.write, item.seq);
      return completion === undefined ? doc : { ...doc, ...completion.newRecordFields(item.write.record_id, item.write.record.feedback_dataset_id, item.write.response.status, item.seq) };
    };
    const docs = at.map(({ item }) => docOf(item));
    const outcomes = await insertNew(records, docs);
    at.forEach(({ i, item }, k) => {
      const outcome = outcomes[k]!;
      if (outcome.kind === 'rejected') results[i] = outcome;
      else {
        lookup.remember(item.write.record_id, item.write.record.feedback_dataset_id);
        notes?.records.push({ index: i, doc: docs[k]! });
      }
      if (outcome.kind === 'inserted') inserted.add(item.write.record_id);
    });
  }

  /** Settles when every round started so far has ended (either way). */
  let lastRound: Promise<unknown> = Promise.resolve();
  /** Settles when every round started so far has written its responses (or ended without). */
  let responsesTurn: Promise<unknown> = Promise.resolve();
  /** Settles when every round started so far has appended its webhook events (or ended without). */
  let eventsTurn: Promise<unknown> = Promise.resolve();
  /** Rounds of at least BACKLOG_ROUND_WRITES writes running, and when the last one ended. */
  let backlogRounds = 0;
  let lastBacklogRoundEnd = 0;

  const rounds = createGroupCommit<readonly SequencedWrite[], WriteResult[]>({
    maxItems: Number.MAX_SAFE_INTEGER,
    maxWeight: options.maxBatchWrites ?? 2_000,
    weight: (items) => items.length,
    // Two store rounds at a time per process: one round's commands wait on the store's answers to
    // the step before (records, then responses, then events and completion), so one round at a
    // time left the store idle between steps (the worker drained at half the rate: docs/performance.md).
    // The rounds are independent as two worker processes' are (conditional updates by `seq`,
    // guards of completion and erasure), but write their responses in turn, so the versions of a
    // response in consecutive rounds are stored in order and each is kept in the history; a round
    // looks again for the records it did not find once the rounds before it are done, so a
    // response never waits for a retry on a record stored beside it.
    maxInFlight: 2,
    async commit(jobs) {
      const backlog = jobs.reduce((n, items) => n + items.length, 0) >= BACKLOG_ROUND_WRITES;
      if (backlog) backlogRounds++;
      try {
        return await commitRound(jobs);
      } finally {
        if (backlog) {
          backlogRounds--;
          lastBacklogRoundEnd = Date.now();
        }
      }
    },
  });

  async function commitRound(jobs: readonly (readonly SequencedWrite[])[]): Promise<WriteResult[][]> {
    const earlier = lastRound;
    const turn = responsesTurn;
    let done!: () => void;
    // The next round's turn comes once this one and every one before it wrote (or ended).
    responsesTurn = Promise.all([turn, new Promise<void>((resolve) => (done = resolve))]);
    const events = eventsTurn;
    let eventsDone!: () => void;
    eventsTurn = Promise.all([events, new Promise<void>((resolve) => (eventsDone = resolve))]);
    // A round the store never answers would hold every later one (they take turns): worker/round-watch.ts.
    const watch = { logger, deadlineMs: options.roundDeadlineMs ?? ROUND_DEADLINE_MS, writes: jobs.reduce((n, items) => n + items.length, 0) };
    const round = watchRound(watch, (at) => store(jobs.flat(), earlier, turn, done, events, eventsDone, at)).finally(() => {
      done();
      eventsDone();
    });
    // Every round started before this one, not only the last: the one before it may end first.
    lastRound = Promise.all([
      earlier,
      round.then(
        () => undefined,
        () => undefined,
      ),
    ]);
    const results = await round;
    let at = 0;
    return jobs.map((items) => results.slice(at, (at += items.length)));
  }

  return {
    write: (items) => (items.length === 0 ? Promise.resolve([]) : rounds.submit(items)),
    busy: () => backlogRounds > 0 || Date.now() - lastBacklogRoundEnd < BUSY_AFTER_MS,
    forgetRecords: (recordIds) => lookup.forget(recordIds),
  };
}
