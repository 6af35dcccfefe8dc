import type { Db } from 'mongodb';
import { createGroupCommit } from '../shared/group-commit.js';
import type { Logger } from '../shared/logger.js';
import { COLLECTIONS } from '../shared/mongo.js';
import {
  firstResponseDoc,
  isRecordWrite,
  isResponseWrite,
  recordDoc,
  responseUpdate,
  type SequencedWrite,
} from './documents.js';
import type { RecordDoc, ResponseDoc } from '../shared/documents.js';
import { insertNew } from './inserts.js';
import { createRecordLookup } from './record-lookup.js';
import { applyUpdates, type UpdateOutcome } from './updates.js';
import type { RoundEvents } from './round-events.js';

/** What a round stored, for its webhook events (worker/round-events.ts); kept only while some endpoint is subscribed. */
interface RoundNotes {
  records: number[];
  insertedResponses: number[];
  maybeStored: number[];
}

/** What became of one write. */
export type WriteResult =
  /** Stored: a record (with its first response, or a later version of it), or a response version. */
  | { readonly kind: 'stored' }
  /** A later-accepted version of the response is stored; `newer` is its order when known. */
  | { readonly kind: 'stale'; readonly newer: number | undefined }
  /** The record of this response is not stored yet (still queued in another job). */
  | { readonly kind: 'deferred' }
  /** The store refuses the write for good. */
  | { readonly kind: 'rejected'; readonly error: string };

export interface FeedbackWriter {
  /**
   * Stores a job's writes and says what became of each, in order. Throws TransientStoreError
   * when the store cannot be reached. Jobs that call while a store round is running are merged
   * into the next round, so concurrent jobs share their store commands.
   */
  write(items: readonly SequencedWrite[]): Promise<WriteResult[]>;
}

interface FeedbackWriterOptions {
  readonly db: Db;
  readonly logger: Logger;
  /** Most writes per store round. Default 2000. */
  readonly maxBatchWrites?: number;
  /** Records remembered as stored, so their responses need no read. Default 100000. */
  readonly recordCacheSize?: number;
  /** Webhook events of each round, appended before the round's jobs complete; absent = none. */
  readonly events?: RoundEvents;
}

const STORED: WriteResult = { kind: 'stored' };
const DEFERRED: WriteResult = { kind: 'deferred' };

export function createFeedbackWriter(options: FeedbackWriterOptions): FeedbackWriter {
  const { db, logger } = options;
  const records = db.collection<RecordDoc>(COLLECTIONS.records);
  const responses = db.collection<ResponseDoc>(COLLECTIONS.responses);
  const lookup = createRecordLookup({ records, capacity: options.recordCacheSize ?? 100_000 });

  /**
   * One store round: records, then for each response the newest version the batch holds. When
   * the store refuses that version for good, the next older one is tried, so a bad update never
   * erases an older valid one.
   */
  async function store(items: readonly SequencedWrite[]): Promise<WriteResult[]> {
    const results: (WriteResult | undefined)[] = new Array<WriteResult | undefined>(items.length);
    const notes: RoundNotes | undefined = options.events?.active() === true ? { records: [], insertedResponses: [], maybeStored: [] } : undefined;
    // Records of this round are known once inserted; the others are looked up meanwhile.
    const inRound = new Set(items.filter(isRecordWrite).map((i) => i.write.record_id));
    const [, datasets] = await Promise.all([
      storeRecords(items, results, notes),
      lookup.datasetsOf(items.filter(isResponseWrite).map((i) => i.write.record_id).filter((id) => !inRound.has(id))),
    ]);
    for (const [i, item] of items.entries()) {
      if (isRecordWrite(item) && results[i] === undefined) datasets.set(item.write.record_id, item.write.record.feedback_dataset_id);
    }
    for (const [i, item] of items.entries()) {
      if (isResponseWrite(item) && !datasets.has(item.write.record_id)) results[i] = DEFERRED;
    }

    let open = candidatesByResponse(items, results);
    while (open.length > 0) {
      const outcomes = await writeNewest(items, open, datasets, notes);
      const next: number[][] = [];
      open.forEach((candidates, k) => {
        const [top, ...older] = candidates as [number, ...number[]];
        const outcome = outcomes[k]!;
        if (outcome.kind === 'rejected') {
          results[top] = outcome;
          if (older.length > 0) next.push(older);
          return;
        }
        if (outcome.kind === 'applied') {
          results[top] = STORED;
          for (const i of older) {
            results[i] = { kind: 'stale', newer: items[top]!.seq };
            logStale(items[i]!, items[top]!.seq);
          }
        } else {
          // The store holds a version newer than the newest here: every candidate lost to it.
          for (const i of candidates) {
            results[i] = { kind: 'stale', newer: undefined };
            void logStoredNewer(items[i]!);
          }
        }
      });
      open = next;
    }
    if (notes !== undefined) await options.events!.emit({ items, ...notes });
    return results.map((r, i) => {
      if (r === undefined) throw new Error(`writer left write ${i} of its round undecided`);
      // A record whose first response lost to a later version of it is stored all the same.
      return r.kind === 'stale' && isRecordWrite(items[i]!) ? STORED : r;
    });
  }

  async function storeRecords(items: readonly SequencedWrite[], results: (WriteResult | undefined)[], notes: RoundNotes | undefined): Promise<void> {
    const at = items.flatMap((item, i) => (isRecordWrite(item) ? [{ i, item }] : []));
    const outcomes = await insertNew(records, at.map(({ item }) => recordDoc(item.write)));
    at.forEach(({ i, item }, k) => {
      const outcome = outcomes[k]!;
      if (outcome.kind === 'rejected') results[i] = outcome;
      else {
        lookup.remember(item.write.record_id, item.write.record.feedback_dataset_id);
        notes?.records.push(i);
      }
    });
  }

  /** Per response id, the writes still to decide, newest first. */
  function candidatesByResponse(items: readonly SequencedWrite[], results: readonly (WriteResult | undefined)[]): number[][] {
    const byResponse = new Map<string, number[]>();
    for (const [i, item] of items.entries()) {
      if (results[i] !== undefined) continue;
      const list = byResponse.get(item.write.response_id);
      if (list === undefined) byResponse.set(item.write.response_id, [i]);
      else list.push(i);
    }
    return [...byResponse.values()].map((list) => list.sort((a, b) => items[b]!.seq - items[a]!.seq));
  }

  /** Writes the newest candidate of each response: first responses by insert, the rest by conditional upsert. */
  async function writeNewest(items: readonly SequencedWrite[], open: readonly number[][], datasets: ReadonlyMap<string, string>, notes: RoundNotes | undefined): Promise<UpdateOutcome[]> {
    const outcomes: UpdateOutcome[] = new Array<UpdateOutcome>(open.length);
    const firsts: { k: number; doc: ResponseDoc }[] = [];
    const updates: number[] = [];
    open.forEach((candidates, k) => {
      const top = items[candidates[0]!]!;
      if (isRecordWrite(top)) firsts.push({ k, doc: firstResponseDoc(top) });
      else updates.push(k);
    });

    const inserted = await insertNew(responses, firsts.map((f) => f.doc));
    firsts.forEach(({ k }, n) => {
      const o = inserted[n]!;
      if (o.kind === 'inserted') notes?.insertedResponses.push(open[k]![0]!);
      else if (o.kind === 'present') notes?.maybeStored.push(open[k]![0]!);
      // Present: the pair's first version is stored already, or a later one; either way ours is not needed.
      outcomes[k] = o.kind === 'inserted' ? { kind: 'applied' } : o.kind === 'present' ? { kind: 'stale' } : o;
    });
    if (updates.length === 0) return outcomes;

    const opOf = (k: number) => {
      const candidates = open[k]!;
      const top = items[candidates[0]!]!;
      const createdAt = Math.min(...candidates.map((i) => items[i]!.write.accepted_at));
      const datasetId = datasets.get(top.write.record_id) ?? (isRecordWrite(top) ? top.write.record.feedback_dataset_id : '');
      return responseUpdate(top, datasetId, createdAt);
    };
    const applied = await applyUpdates(responses, updates.map(opOf));
    updates.forEach((k, n) => {
      outcomes[k] = applied[n]!;
      if (applied[n]!.kind === 'applied') notes?.maybeStored.push(open[k]![0]!);
    });
    return outcomes;
  }

  function logStale(item: SequencedWrite, newer: number): void {
    logger.debug({ response_id: item.write.response_id, request_id: item.write.request_id, stale_seq: item.seq, stored_seq: newer }, 'update dropped: a later-accepted version is stored');
  }

  /** The stored order is read only when debug logging is on: it costs a read. */
  async function logStoredNewer(item: SequencedWrite): Promise<void> {
    if (!logger.isLevelEnabled('debug')) return;
    const stored = await responses.findOne({ _id: item.write.response_id }, { projection: { seq: 1 } }).catch(() => null);
    logStale(item, stored?.seq ?? Number.NaN);
  }

  const rounds = createGroupCommit<readonly SequencedWrite[], WriteResult[]>({
    maxItems: Number.MAX_SAFE_INTEGER,
    maxWeight: options.maxBatchWrites ?? 2_000,
    weight: (items) => items.length,
    // One store round at a time per process: a round then finds the records of the rounds before
    // it stored (or remembered), instead of deferring their responses to a retry of the job.
    maxInFlight: 1,
    async commit(jobs) {
      const results = await store(jobs.flat());
      let at = 0;
      return jobs.map((items) => results.slice(at, (at += items.length)));
    },
  });

  return {
    write: (items) => (items.length === 0 ? Promise.resolve([]) : rounds.submit(items)),
  };
}
