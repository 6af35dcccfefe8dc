import { MongoBulkWriteError, type AnyBulkWriteOperation, type Collection } from 'mongodb';
import type { ResponseDoc } from '../shared/documents.js';
import type { ResponseUpdate } from './documents.js';
import { isDuplicateKey, isTransientMongoError, TransientStoreError } from './errors.js';
import type { StoreProfile } from '../shared/store-profile.js';

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

/**
 * Applies conditional upserts (documents.ts `responseUpdate`), `profile.updateBatchSize` per
 * command, one command at a time. A command without error applied every operation in it: a miss
 * always surfaces as a duplicate key, since the _id exists. A duplicate key is checked once more
 * without upsert: it matches when an older version was inserted meanwhile (then applied), and
 * misses when a later one is stored (stale). `timeoutMs` bounds each command (the driver's CSOT).
 */
export async function applyUpdates(col: Collection<ResponseDoc>, ops: readonly ResponseUpdate[], profile: StoreProfile, timeoutMs?: number): Promise<UpdateOutcome[]> {
  const timeout = timeoutMs === undefined ? {} : { timeoutMS: Math.max(1, timeoutMs) };
  const outcomes: UpdateOutcome[] = [];
  for (let start = 0; start < ops.length; start += profile.updateBatchSize) {
    const chunk = ops.slice(start, start + profile.updateBatchSize);
    const attempts = await applyChunk(col, chunk, profile, timeout);
    for (const [i, attempt] of attempts.entries()) {
      outcomes.push(attempt.kind === 'conflict' ? await recheck(col, chunk[i]!, timeout) : attempt);
    }
  }
  return outcomes;
}

async function applyChunk(col: Collection<ResponseDoc>, chunk: readonly ResponseUpdate[], profile: StoreProfile, timeout: { timeoutMS?: number }): Promise<Attempt[]> {
  if (!profile.setReplacesDocuments) await clearValues(col, chunk, timeout);
  const bulk: AnyBulkWriteOperation<ResponseDoc>[] = chunk.map((op) => ({ updateOne: { filter: op.filter, update: op.update, upsert: true } }));
  try {
    await col.bulkWrite(bulk, { ordered: false, ...timeout });
    return chunk.map(() => APPLIED);
  } catch (err) {
    transientOr(err, undefined);
    if (profile.reliableUpdateErrors && accountsForEveryOperation(err, chunk.length)) return attemptsFromBulkError(err, chunk.length);
  }
  // FerretDB stops at the first error and its indexes cannot be trusted: one at a time, which is
  // harmless for those that did apply (the filter matches their own version again).
  const attempts: Attempt[] = [];
  for (const op of chunk) {
    try {
      await col.updateOne(op.filter, op.update, { upsert: true, ...timeout });
      attempts.push(APPLIED);
    } catch (err) {
      attempts.push(isDuplicateKey(err) ? { kind: 'conflict' } : transientOr(err, { kind: 'rejected', error: (err as Error).message }));
    }
  }
  return attempts;
}

/**
 * Sets `values` to null where the version about to be written applies (same filter, no upsert),
 * so that the `$set` after it cannot be taken for "unchanged" (FerretDB, see StoreProfile). The
 * lease the caller holds keeps other writers out between the two commands; a reader may see the
 * null for that moment. An operation that fails here fails again in the update and is handled there.
 */
async function clearValues(col: Collection<ResponseDoc>, chunk: readonly ResponseUpdate[], timeout: { timeoutMS?: number }): Promise<void> {
  const bulk: AnyBulkWriteOperation<ResponseDoc>[] = chunk.map((op) => ({ updateOne: { filter: op.filter, update: { $set: { values: null as unknown as ResponseDoc["values"] } } } }));
  try {
    await col.bulkWrite(bulk, { ordered: false, ...timeout });
  } catch (err) {
    transientOr(err, undefined);
  }
}

/** As inserts.ts `accountsForEveryDocument`: every operation either matched, upserted or has its error. */
function accountsForEveryOperation(err: unknown, count: number): err is MongoBulkWriteError {
  if (!(err instanceof MongoBulkWriteError)) return false;
  const writeErrors = Array.isArray(err.writeErrors) ? err.writeErrors : [err.writeErrors];
  return writeErrors.length > 0 && err.result.matchedCount + err.result.upsertedCount + writeErrors.length === count;
}

/** What each operation of a failed unordered update command did, from its per-operation errors (MongoDB). */
export function attemptsFromBulkError(err: MongoBulkWriteError, count: number): Attempt[] {
  const attempts: Attempt[] = new Array<Attempt>(count).fill(APPLIED);
  const writeErrors = Array.isArray(err.writeErrors) ? err.writeErrors : [err.writeErrors];
  for (const e of writeErrors) {
    if (e.index >= 0 && e.index < count) attempts[e.index] = e.code === 11000 ? { kind: 'conflict' } : { kind: 'rejected', error: e.errmsg ?? `store error ${e.code}` };
  }
  return attempts;
}

async function recheck(col: Collection<ResponseDoc>, op: ResponseUpdate, timeout: { timeoutMS?: number }): Promise<UpdateOutcome> {
  try {
    const r = await col.updateOne(op.filter, op.update, { upsert: false, ...timeout });
    return r.matchedCount > 0 ? APPLIED : STALE;
  } catch (err) {
    return transientOr(err, { kind: 'rejected', error: (err as Error).message });
  }
}
