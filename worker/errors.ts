import { MongoBulkWriteError, MongoError, MongoNetworkError, MongoServerSelectionError } from 'mongodb';

/** MongoDB is unreachable or busy: retry later without using a job attempt. */
export class TransientStoreError extends Error {
  constructor(cause: unknown) {
    super(`store unavailable: ${(cause as Error).message}`, { cause });
    this.name = 'TransientStoreError';
  }
}

// Server codes that mean "not now" rather than "never": shutdowns, elections, timeouts, limits.
const TRANSIENT_CODES = new Set([6, 7, 89, 91, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436, 50, 112, 251]);

export function isTransientMongoError(err: unknown): boolean {
  if (err instanceof MongoNetworkError || err instanceof MongoServerSelectionError) return true;
  // A bulk command whose connection failed carries the network error only as its message.
  if (err instanceof MongoBulkWriteError && /ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|connection .* closed|socket/i.test(err.message)) return true;
  if (err instanceof MongoError) {
    if (err.hasErrorLabel('RetryableWriteError') || err.hasErrorLabel('ResetPool') || err.hasErrorLabel('TransientTransactionError')) return true;
    if (typeof err.code === 'number' && TRANSIENT_CODES.has(err.code)) return true;
    const name = err.name;
    if (name === 'MongoTopologyClosedError' || name === 'MongoNotConnectedError' || name === 'MongoPoolClearedError' || name === 'MongoOperationTimeoutError') return true;
    return false;
  }
  // Not a MongoDB error (a bug): the job fails its attempt and, in the end, is dead-lettered.
  return false;
}

export function isDuplicateKey(err: unknown): boolean {
  return err instanceof MongoError && err.code === 11000;
}

/** Some responses of a job wait for records that another job has not stored yet. */
export class RecordsPendingError extends Error {
  constructor(count: number) {
    super(`${count} response(s) wait for records not stored yet`);
    this.name = 'RecordsPendingError';
  }
}
