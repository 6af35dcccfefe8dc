import type { AnyBulkWriteOperation, Collection } from 'mongodb';
import { operationsAborted, outcomesOfBulkError } from './bulk-errors.js';
import type { ConditionalUpdate } from './documents.js';
import { splitOversize } from './document-size.js';
import { isDuplicateKey, isTransientMongoError, TransientStoreError } from './errors.js';
import { inChunks, STORE_CHUNK_DOCS } from './store-chunks.js';

/** What became of one conditional update. */
export type UpdateOutcome = { readonly kind: 'applied' } | { readonly kind: 'stale' } | { readonly kind: 'rejected'; readonly error: string };

const APPLIED: UpdateOutcome = { kind: 'applied' };
const STALE: UpdateOutcome = { kind: 'stale' };
/** A duplicate key on the upsert: a later version is stored, or an older one was inserted meanwhile. */
type Attempt = UpdateOutcome | { readonly kind: 'conflict' };

function transientOr<T>(err: unknown, otherwise: T): T {
  if (isTransientMongoError(err)) throw new TransientStoreError(err);
  return otherwise;
}

/** A document kept in acceptance order: its `seq` is the order of the version stored. */
type Sequenced = { _id: string; seq: number };

/**
 * Applies conditional upserts (documents.ts `responseUpdate`, suggestions.ts) in unordered update commands of at
 * most STORE_CHUNK_DOCS, sent at once (worker/store-chunks.ts). Correctness rests on the store applying
 * each single-document update atomically: the filter `{_id, seq: {$lte}}` matches only an
 * earlier (or the same) version, and when a later one is stored the upsert's insert of the same
 * _id fails with a duplicate key. A duplicate key is checked once more without upsert: it matches
 * when an older version was inserted meanwhile (then applied), and misses when a later one is
 * stored (stale).
 */
export async function applyUpdates<D extends Sequenced>(col: Collection<D>, ops: readonly ConditionalUpdate<D>[]): Promise<UpdateOutcome[]> {
  if (ops.length === 0) return [];
  // In the order of their _id: every worker's command then locks the documents it updates in the
  // same order, so two commands that update the same documents wait for each other instead of
  // deadlocking (on a PostgreSQL-based store each command's updates hold their locks together).
  const order = ops.map((_, i) => i).sort((a, b) => compareIds(ops[a]!.filter._id, ops[b]!.filter._id));
  const sorted = order.map((i) => ops[i]!);
  const attempts = await inChunks(sorted, STORE_CHUNK_DOCS, (slice) => applyAll(col, slice));
  const outcomes = new Array<UpdateOutcome>(ops.length);
  for (const [k, attempt] of attempts.entries()) outcomes[order[k]!] = attempt.kind === 'conflict' ? await recheck(col, sorted[k]!) : attempt;
  return outcomes;
}

function compareIds(a: unknown, b: unknown): number {
  const x = String(a);
  const y = String(b);
  return x < y ? -1 : x > y ? 1 : 0;
}

async function applyAll<D extends Sequenced>(col: Collection<D>, ops: readonly ConditionalUpdate<D>[]): Promise<Attempt[]> {
  const bulk: AnyBulkWriteOperation<D>[] = ops.map((op) => ({ updateOne: { filter: op.filter, update: op.update, upsert: true } }));
  try {
    await col.bulkWrite(bulk, { ordered: false });
    return ops.map(() => APPLIED);
  } catch (err) {
    // An update over the document limit cannot be sent; refused alone, the others go on together.
    const split = await splitOversize<ConditionalUpdate<D>, Attempt>(err, ops, (op) => ({ filter: op.filter, update: op.update }), (fitting) => applyAll(col, fitting), (error) => ({ kind: 'rejected', error }));
    if (split !== undefined) return split;
    if (!operationsAborted(err)) transientOr(err, undefined);
    const attempts = updateAttempts(err, ops.length);
    if (attempts !== undefined) return attempts;
  }
  // An error that does not say what became of each operation (the driver refused the command
  // before sending it…), or operations aborted by a deadlock: one at a time, which is harmless for those that did apply (the filter
  // matches their own version again).
  const attempts: Attempt[] = [];
  for (const op of ops) {
    try {
      await col.updateOne(op.filter, op.update, { upsert: true });
      attempts.push(APPLIED);
    } catch (err) {
      attempts.push(isDuplicateKey(err) ? { kind: 'conflict' } : transientOr(err, { kind: 'rejected', error: (err as Error).message }));
    }
  }
  return attempts;
}

/** Per operation, from an unordered update command's bulk error; undefined when the error does not account for every one. Exported for its unit test. */
export function updateAttempts(err: unknown, count: number): Attempt[] | undefined {
  return outcomesOfBulkError<Attempt>(err, count, {
    applied: (result) => result.matchedCount + result.upsertedCount,
    ok: APPLIED,
    failed: (code, message) => (code === 11000 ? { kind: 'conflict' } : { kind: 'rejected', error: message }),
  });
}

async function recheck<D extends Sequenced>(col: Collection<D>, op: ConditionalUpdate<D>): Promise<UpdateOutcome> {
  try {
    const again = op.recheck?.() ?? op;
    const r = await col.updateOne(again.filter, again.update, { upsert: false });
    return r.matchedCount > 0 ? APPLIED : STALE;
  } catch (err) {
    return transientOr(err, { kind: 'rejected', error: (err as Error).message });
  }
}
