import { MongoBulkWriteError, type BulkWriteResult } from 'mongodb';
import { isStoreConnectionLoss, TRANSIENT_CODES } from './errors.js';

/*
 * What each operation of a failed unordered bulk command (insertMany, bulkWrite) did, from the
 * error alone: the one accounting that inserts.ts and updates.ts share.
 */

/**
 * One outcome per operation, when the error accounts for every one of them (the operations that
 * applied, counted by `applied(result)`, plus one write error for each of the others); else
 * undefined. A connection lost mid-command also arrives as a MongoBulkWriteError, with no
 * per-operation errors at all: reading that as "all applied" would lose them. Undefined too when
 * an operation failed with a transient code (errors.ts TRANSIENT_CODES).
 */
export function outcomesOfBulkError<T>(
  err: unknown,
  count: number,
  options: {
    /** How many operations the result says applied (inserted; matched + upserted). */
    readonly applied: (result: BulkWriteResult) => number;
    /** The outcome of an operation without an error. */
    readonly ok: T;
    /** The outcome of an operation with this error code and message. */
    readonly failed: (code: number | undefined, message: string) => T;
  },
): T[] | undefined {
  if (!(err instanceof MongoBulkWriteError)) return undefined;
  const writeErrors = Array.isArray(err.writeErrors) ? err.writeErrors : [err.writeErrors];
  if (writeErrors.length === 0 || options.applied(err.result) + writeErrors.length !== count) return undefined;
  // An operation aborted for a reason that passes (a deadlock between two commands' locks) is
  // not refused: the caller repeats the operations one at a time, and a lone one that still
  // meets it pauses the queue as any outage does.
  if (writeErrors.some((e) => TRANSIENT_CODES.has(e.code))) return undefined;
  // An operation cut off by the store losing its backend is not refused either: the whole command is an outage.
  if (writeErrors.some((e) => isStoreConnectionLoss(e.code, e.errmsg ?? ''))) return undefined;
  const outcomes: T[] = new Array<T>(count).fill(options.ok);
  for (const e of writeErrors) {
    if (e.index >= 0 && e.index < count) outcomes[e.index] = options.failed(e.code, e.errmsg ?? `store error ${e.code}`);
  }
  return outcomes;
}

/**
 * A bulk command whose only trouble is operations the store aborted for a passing reason (a
 * deadlock with another command's locks): repeated one at a time, they cannot deadlock again
 * (a lone update locks one document), so the caller does that rather than pausing the queue.
 */
export function operationsAborted(err: unknown): boolean {
  if (!(err instanceof MongoBulkWriteError) || err.result?.getWriteConcernError?.() !== undefined) return false;
  const writeErrors = Array.isArray(err.writeErrors) ? err.writeErrors : [err.writeErrors];
  return writeErrors.some((e) => TRANSIENT_CODES.has(e.code));
}
