import type { Collection } from 'mongodb';
import type { ResponseDoc } from '../shared/documents.js';
import type { Logger } from '../shared/logger.js';
import { writeTargetId } from '../shared/writes.js';
import { carriesResponse, firstResponseDoc, isRecordWrite, responseUpdate, type ResponseCarrying, type SequencedWrite } from './documents.js';
import { insertNew } from './inserts.js';
import { responseUpdateWithHistory, withHistory } from './response-history.js';
import { applyUpdates, type UpdateOutcome } from './updates.js';
import { STORED, type WriteResult } from './write-result.js';

// The responses of one store round (worker/writer.ts): per response the newest version the round
// holds, first versions inserted, later ones by the conditional upsert of worker/updates.ts; a
// version the store refuses for good gives way to the next older one, so a bad update never
// erases an older valid one.

const TOO_LARGE = /MaxDocumentSize|BSONObjectTooLarge|larger than 16777216|document is too large|object to insert too large/i;

/** Where a round's stored responses are noted for its webhook events (worker/round-events.ts). */
export interface ResponseNotes {
  insertedResponses: number[];
  maybeStored: number[];
}

export interface ResponseRound {
  /** Decides every response-carrying write of `items` whose result is still undefined, in `results`. */
  store(items: readonly SequencedWrite[], results: (WriteResult | undefined)[], datasets: ReadonlyMap<string, string>, notes: ResponseNotes | undefined): Promise<void>;
}

export function createResponseRound(options: { readonly responses: Collection<ResponseDoc>; readonly logger: Logger; readonly historyMax: number }): ResponseRound {
  const { responses, logger, historyMax } = options;

  /** Per response, the newest version of the round; when the store refuses it, the next older one. */
  async function store(items: readonly SequencedWrite[], results: (WriteResult | undefined)[], datasets: ReadonlyMap<string, string>, notes: ResponseNotes | undefined): Promise<void> {
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
  }

  /** Per response id, the writes still to decide, newest first. */
  function candidatesByResponse(items: readonly SequencedWrite[], results: readonly (WriteResult | undefined)[]): number[][] {
    const byResponse = new Map<string, number[]>();
    for (const [i, item] of items.entries()) {
      if (results[i] !== undefined || !carriesResponse(item)) continue;
      const list = byResponse.get(item.write.response_id);
      if (list === undefined) byResponse.set(item.write.response_id, [i]);
      else list.push(i);
    }
    return [...byResponse.values()].map((list) => list.sort((a, b) => items[b]!.seq - items[a]!.seq));
  }

  /** Writes the newest candidate of each response: first responses by insert, the rest by conditional upsert. */
  async function writeNewest(items: readonly SequencedWrite[], open: readonly number[][], datasets: ReadonlyMap<string, string>, notes: ResponseNotes | undefined): Promise<UpdateOutcome[]> {
    const outcomes: UpdateOutcome[] = new Array<UpdateOutcome>(open.length);
    const firsts: { k: number; doc: ResponseDoc }[] = [];
    const updates: number[] = [];
    open.forEach((candidates, k) => {
      const top = items[candidates[0]!]!;
      if (isRecordWrite(top)) firsts.push({ k, doc: historyMax > 0 ? withHistory(firstResponseDoc(top)) : firstResponseDoc(top) });
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

    const opOf = (k: number, cap: number) => {
      const candidates = open[k]!;
      const top = items[candidates[0]!]! as ResponseCarrying;
      const createdAt = Math.min(...candidates.map((i) => items[i]!.write.accepted_at));
      const datasetId = datasets.get(top.write.record_id) ?? (isRecordWrite(top) ? top.write.record.feedback_dataset_id : '');
      if (historyMax > 0) return responseUpdateWithHistory(top, candidates.slice(1).map((i) => items[i]! as ResponseCarrying), datasetId, createdAt, cap);
      return responseUpdate(top, datasetId, createdAt);
    };
    const applied = await applyUpdates(responses, updates.map((k) => opOf(k, historyMax)));
    // A version the store refuses because the document with its history passes the 16 MiB limit
    // is written again keeping no earlier version: the answer promised the version, the history is
    // bounded and drops its oldest first (docs/annotation.md). Refused again, it is refused.
    const tooLarge = historyMax === 0 ? [] : updates.flatMap((k, n) => (isTooLarge(applied[n]!) ? [{ k, n }] : []));
    if (tooLarge.length > 0) {
      const again = await applyUpdates(responses, tooLarge.map(({ k }) => opOf(k, 0)));
      tooLarge.forEach(({ k, n }, i) => {
        applied[n] = again[i]!;
        const top = items[open[k]![0]!]!;
        logger.warn({ response_id: writeTargetId(top.write), request_id: top.write.request_id, stored: again[i]!.kind === 'applied' }, 'response history dropped: the document with it passed the store\'s size limit');
      });
    }
    updates.forEach((k, n) => {
      outcomes[k] = applied[n]!;
      if (applied[n]!.kind === 'applied') notes?.maybeStored.push(open[k]![0]!);
    });
    return outcomes;
  }

  /** The store's refusal of a document over its size limit (MongoDB: BSONObjectTooLarge and kin; the stand-in: MaxDocumentSize). */
  function isTooLarge(outcome: UpdateOutcome): boolean {
    return outcome.kind === 'rejected' && TOO_LARGE.test(outcome.error);
  }

  function logStale(item: SequencedWrite, newer: number): void {
    logger.debug({ response_id: writeTargetId(item.write), request_id: item.write.request_id, stale_seq: item.seq, stored_seq: newer }, 'update dropped: a later-accepted version is stored');
  }

  /** The stored order is read only when debug logging is on: it costs a read. */
  async function logStoredNewer(item: SequencedWrite): Promise<void> {
    if (!logger.isLevelEnabled('debug')) return;
    const stored = await responses.findOne({ _id: writeTargetId(item.write) }, { projection: { seq: 1 } }).catch(() => null);
    logStale(item, stored?.seq ?? Number.NaN);
  }

  return { store };
}
