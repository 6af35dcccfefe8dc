import { MongoNetworkError, MongoServerSelectionError } from 'mongodb';
import { AppError } from '../shared/errors.js';

/** Driver errors that say MongoDB did not answer (rather than refused what it was sent). */
const STORE_DOWN_ERRORS = new Set(['MongoTopologyClosedError', 'MongoNotConnectedError', 'MongoPoolClearedError', 'MongoOperationTimeoutError']);

/** Whether `err` is MongoDB being unreachable or not answering: the store's moment, not a bug. */
export function isStoreDown(err: unknown): boolean {
  return err instanceof MongoNetworkError || err instanceof MongoServerSelectionError || (err instanceof Error && STORE_DOWN_ERRORS.has(err.name));
}

/** 503 `store_unavailable` with `Retry-After`. */
export function storeUnavailable(retryAfterSeconds: number, message: string, cause?: unknown): AppError {
  return new AppError('store_unavailable', message, { headers: { 'Retry-After': String(retryAfterSeconds) }, ...(cause === undefined ? {} : { cause }) });
}
