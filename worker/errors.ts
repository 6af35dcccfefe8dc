import { MongoBulkWriteError, MongoError, MongoNetworkError, MongoServerSelectionError, MongoWriteConcernError } from 'mongodb';

/** MongoDB is unreachable or busy: retry later without using a job attempt. */
export class TransientStoreError extends Error {
  constructor(cause: unknown) {
    super(`store unavailable: ${(cause as Error).message}`, { cause });
    this.name = 'TransientStoreError';
  }
}

/**
 * The code a DocumentDB-based store (FerretDB v2, the stand-in; Azure Cosmos DB for MongoDB vCore)
 * reports for a PostgreSQL error: the SQLSTATE packed as PostgreSQL's MAKE_SQLSTATE does (six bits
 * per character, first character lowest). For example `deadlock detected` (40P01) is 16908292.
 */
export function sqlStateCode(sqlState: string): number {
  let code = 0;
  for (let i = 0; i < 5; i++) code += ((sqlState.charCodeAt(i) - 48) & 0x3f) * 2 ** (6 * i);
  return code;
}

/**
 * PostgreSQL's "not now" errors as such a store reports them: two updates of one command that
 * lock documents in opposite orders (40P01 deadlock_detected, one of them is aborted), 40001
 * serialization_failure, 55P03 lock_not_available; a statement cancelled (57014 query_canceled,
 * a statement timeout) or a server shutting down or starting (57P01-57P03); a server short of
 * resources (53000 insufficient_resources, 53100 disk_full, 53200 out_of_memory, 53300
 * too_many_connections). MongoDB's own for a write conflict is 112 WriteConflict, above.
 * Repeating the operation later is what these ask for; taken for a refusal, the writer would
 * dead-letter the newest version and store an older one in its place. A refusal of the data
 * itself (class 22 data exception, 23 integrity, 54 limits, DocumentDB's own M0 codes) stays one.
 */
export const STORE_TRANSIENT_SQLSTATES = ['40P01', '40001', '55P03', '57014', '57P01', '57P02', '57P03', '53000', '53100', '53200', '53300'] as const;

/**
 * Server codes that mean "not now" rather than "never". Replica-set elections and step-downs:
 * 10107 NotWritablePrimary, 189 PrimarySteppedDown, 11602 InterruptedDueToReplStateChange,
 * 13435 NotPrimaryNoSecondaryOk, 13436 NotPrimaryOrSecondary, 10058 LegacyNotPrimary, 91
 * ShutdownInProgress, 11600 InterruptedAtShutdown, 133 FailedToSatisfyReadPreference. Network and
 * time: 6, 7, 89, 9001, 262 ExceededTimeLimit, 50 MaxTimeMSExpired. Sharding metadata being
 * refreshed: 13388 StaleConfig, 63 StaleShardVersion, 150 StaleEpoch. Write concern: 64
 * WriteConcernTimeout (the majority did not confirm in time). Contention: 112 WriteConflict,
 * 251 NoSuchTransaction.
 */
export const TRANSIENT_CODES: ReadonlySet<number> = new Set([
  10107, 189, 11602, 13435, 13436, 10058, 91, 11600, 133, 6, 7, 89, 9001, 262, 50, 13388, 63, 150, 64, 112, 251,
  ...STORE_TRANSIENT_SQLSTATES.map((s) => sqlStateCode(s)),
]);

/**
 * A DocumentDB-based store (FerretDB v2) that lost its PostgreSQL connection answers with code 1
 * (InternalError) and the text of the connection's failure, not with a SQLSTATE: a backend killed
 * or crashed mid-command (`unexpected EOF`), the cluster restarting after a backend crash (`the
 * database system is in recovery mode`, `... is not yet accepting connections`), a backend
 * terminated (`terminating connection due to administrator command`), or not reachable at all.
 * Seen on FerretDB v2.5.0 with a PostgreSQL backend killed under load (session note of
 * 2026-11-26); read as refusals, such a restart would fail every job's attempts in turn and
 * dead-letter their writes.
 */
const STORE_CONNECTION_LOST = /unexpected EOF|the database system is (?:in recovery mode|not yet accepting connections|shutting down|starting up)|terminating connection|server closed the connection|connection (?:refused|reset)|broken pipe|conn closed|failed to connect/i;

/** True for a store error code and message that say the store lost its own backend, not that it refused the data. */
export function isStoreConnectionLoss(code: number | undefined, message: string): boolean {
  return (code === 1 || code === undefined) && STORE_CONNECTION_LOST.test(message);
}

/** Labels the server or the driver puts on errors that a retry may cure. */
const TRANSIENT_LABELS = ['RetryableWriteError', 'TransientTransactionError', 'ResetPool', 'NoWritesPerformed'] as const;

/**
 * Whether a store error is an outage (an election, a lost connection, a write not yet confirmed
 * by the write concern) rather than a refusal of the data. Outages pause the queue and use no
 * job attempt, so they never dead-letter anything; a refusal is decided per document.
 *
 * A write concern error, whatever its code, counts as an outage: the write may stand on the
 * primary alone and vanish in a rollback, so the job is not complete until it is confirmed, and
 * repeating it is harmless (every write is idempotent). A setting the servers cannot satisfy
 * (`w` above their count) thus pauses the queue, with a warning per retry, instead of sending
 * every write to the dead letters.
 */
export function isTransientMongoError(err: unknown): boolean {
  if (err instanceof MongoNetworkError || err instanceof MongoServerSelectionError) return true;
  if (err instanceof MongoWriteConcernError) return true;
  if (err instanceof MongoBulkWriteError) {
    // Per-document errors may come with a write concern error on the documents that did apply.
    if (err.result?.getWriteConcernError?.() !== undefined) return true;
    // A bulk command whose connection failed carries the network error only as its message.
    if (/ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|connection .* closed|socket/i.test(err.message)) return true;
  }
  if (err instanceof MongoError) {
    if (TRANSIENT_LABELS.some((label) => err.hasErrorLabel(label))) return true;
    if (typeof err.code === 'number' && TRANSIENT_CODES.has(err.code)) return true;
    if (isStoreConnectionLoss(typeof err.code === 'number' ? err.code : undefined, err.message)) return true;
    const name = err.name;
    if (name === 'MongoTopologyClosedError' || name === 'MongoNotConnectedError' || name === 'MongoPoolClearedError' || name === 'MongoOperationTimeoutError') return true;
    return false;
  }
  // Not a MongoDB error (a bug): the job fails its attempt and, in the end, is dead-lettered.
  return false;
}

/** Runs a store call; an outage becomes {@link TransientStoreError} (the job waits and runs again), anything else is rethrown as is. */
export async function storeCall<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    if (isTransientMongoError(err)) throw new TransientStoreError(err);
    throw err;
  }
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
