import { Readable } from 'node:stream';
import { authenticatedKey, type ApiParamsContext, type ApiContext, type ApiMiddleware } from '../state.js';
import * as v from 'valibot';
import { AppError } from '../../shared/errors.js';
import { TimeoutError, withTimeout } from '../../shared/process.js';
import { isStoreDown, storeUnavailable } from '../store-down.js';
import type { IdMinter } from '../../shared/ids.js';
import { invalidInput, parseQuery } from '../parse-input.js';
import type { AuthenticatedKey } from '../key-verifier.js';
import { mayReadDataset } from '../scopes.js';
import { DatasetIdParam, ExportQuery, NoParameters, groupMetadataParams, RecordListQuery, toFilters, toListing } from '../read-query.js';
import { TooManyUpdatedRecordsError, type RecordReader } from '../reads.js';

export interface ReadRouteDeps {
  readonly reader: RecordReader;
  readonly ids: IdMinter;
  readonly retryAfterSeconds: number;
  /**
   * `MONGODB_TIMEOUT_MS`: how long a read that ends with one answer (a record, a page, a history,
   * the export's first line) waits for MongoDB before its 503. Absent = as long as the driver's
   * sockets wait (6× that, at least 30 s).
   */
  readonly readTimeoutMs?: number;
}

type ParamsContext = ApiParamsContext;

function apiKey(ctx: ApiContext): AuthenticatedKey {
  return authenticatedKey(ctx);
}

/** Lets through keys that may read (read or admin scope); 403 `forbidden` otherwise. After `authenticate`. */
export function requireRead(): ApiMiddleware {
  return async (ctx, next) => {
    const key = authenticatedKey(ctx);
    if (key === undefined || !(key.read || key.admin)) throw new AppError('forbidden', 'this API key has no read scope (npm run keys -- create --read, or READ_API_KEY_NAMES)');
    await next();
  };
}

/**
 * MongoDB unreachable is the store's moment, not a bug: 503 with Retry-After instead of 500. A
 * `bounded` read (the default) that has no answer within `readTimeoutMs` is 503 too: a server
 * that hangs with its connections open is found by the driver only when a socket times out. A
 * `whole pass` (agreement, progress: every response of a dataset) is not bounded, a large
 * dataset's pass may take longer. The abandoned read goes on and ends with the driver's timeout.
 */
export async function fromStore<T>(deps: Pick<ReadRouteDeps, 'retryAfterSeconds' | 'readTimeoutMs'>, read: () => Promise<T>, extent: 'bounded' | 'whole pass' = 'bounded'): Promise<T> {
  const unavailable = (message: string, cause: unknown) => storeUnavailable(deps.retryAfterSeconds, message, cause);
  try {
    const reading = read();
    return await (extent === 'bounded' && deps.readTimeoutMs !== undefined ? withTimeout(reading, deps.readTimeoutMs, 'MongoDB') : reading);
  } catch (err) {
    if (err instanceof TimeoutError) throw unavailable(`MongoDB did not answer within ${deps.readTimeoutMs} ms (MONGODB_TIMEOUT_MS); retry later`, err);
    if (isStoreDown(err)) throw unavailable('MongoDB did not answer; retry later', err);
    throw err;
  }
}

/** The `{dataset_id}` of the path, checked like a write's dataset id and against the key's scope. */
export function readableDataset(ctx: ParamsContext): string {
  const datasetId = ctx.params['dataset_id'] ?? '';
  const parsed = v.safeParse(DatasetIdParam, datasetId);
  if (!parsed.success) throw invalidInput('path.dataset_id', parsed.issues[0].message);
  if (!mayReadDataset(apiKey(ctx), datasetId)) throw new AppError('forbidden', 'this API key may not read this dataset');
  return datasetId;
}

/**
 * `GET /feedback-record/:id`: the stored record with its responses. A record id carries an HMAC
 * tag (shared/ids.ts) and is disclosed only in a 200, so a valid tag proves the record was
 * accepted: not stored yet is 404 `record_pending` (with Retry-After), a tag that does not verify
 * is 404 `record_not_found`.
 */
export function getFeedbackRecord(deps: ReadRouteDeps) {
  return async (ctx: ParamsContext): Promise<void> => {
    const id = readableRecordId(deps, ctx);
    parseQuery(NoParameters, ctx.query);
    const record = await fromStore(deps, () => deps.reader.getRecord(id));
    if (record === undefined) throw recordPending(deps);
    checkRecordDataset(ctx, record.feedback_dataset_id);
    ctx.body = record;
  };
}

/**
 * The `{id}` of a record path, if it may be a record this key reads: a tag that does not verify is
 * 404 `record_not_found`, and a dataset-scoped key is checked against the id's dataset fingerprint
 * before any read, so it learns nothing of another dataset's records, stored or not.
 */
export function readableRecordId(deps: Pick<ReadRouteDeps, 'ids'>, ctx: ParamsContext): string {
  const id = ctx.params['id'] ?? '';
  if (!deps.ids.isMintedRecordId(id)) throw new AppError('record_not_found', 'no record has this feedback_record_id');
  const key = apiKey(ctx);
  if (!key.admin && key.datasets !== null && !key.datasets.some((d) => deps.ids.datasetMatches(id, d))) {
    throw new AppError('forbidden', 'this API key may not read the dataset of this record');
  }
  return id;
}

/** After the read: the stored record's dataset against the key's scope (fingerprints may collide). */
export function checkRecordDataset(ctx: ParamsContext, datasetId: string): void {
  if (!mayReadDataset(apiKey(ctx), datasetId)) throw new AppError('forbidden', 'this API key may not read the dataset of this record');
}

/** A record id whose tag verifies but that is not stored: accepted, still queued. */
export function recordPending(deps: Pick<ReadRouteDeps, 'retryAfterSeconds'>): AppError {
  return new AppError('record_pending', 'the record was accepted and is queued, not stored yet; retry shortly', { headers: { 'Retry-After': String(deps.retryAfterSeconds) } });
}

/** `GET /datasets/:dataset_id/records`: a page of records, see api/read-query.ts for the query and api/record-filters.ts for its filters. */
export function listDatasetRecords(deps: ReadRouteDeps) {
  return async (ctx: ParamsContext): Promise<void> => {
    const datasetId = readableDataset(ctx);
    const query = parseQuery(RecordListQuery, groupMetadataParams(ctx.query));
    const cursorDataset = query.cursor?.datasetId;
    if (cursorDataset !== undefined && cursorDataset !== datasetId) throw invalidInput('query.cursor', 'belongs to another dataset than this query');
    try {
      ctx.body = await fromStore(deps, () => deps.reader.listRecords(datasetId, toListing(query)));
    } catch (err) {
      if (err instanceof TooManyUpdatedRecordsError) {
        throw invalidInput('query.updated_since', `is too far back: ${err.message} (at most ${err.max}); choose a later time, or page without updated_since or export the dataset`);
      }
      throw err;
    }
  };
}

/**
 * `GET /datasets/:dataset_id/export`: NDJSON, one record with its responses per line. The lines
 * flow through a Readable that pulls from the cursor only when the socket takes more (a slow
 * client pauses the cursor); Koa destroys the body when the client goes away, which returns the
 * generator and closes the cursor.
 */
export function exportDataset(deps: ReadRouteDeps) {
  return async (ctx: ParamsContext): Promise<void> => {
    const datasetId = readableDataset(ctx);
    const filters = toFilters(parseQuery(ExportQuery, groupMetadataParams(ctx.query)));
    const lines = deps.reader.exportDataset(datasetId, filters);
    // The first line is read before answering, so that MongoDB down is a 503, not a 200 cut short.
    let first: IteratorResult<string, void>;
    try {
      first = await fromStore(deps, () => lines.next());
    } catch (err) {
      // Queued behind a next() still waiting for MongoDB: the cursor is closed once that ends.
      lines.return(undefined).catch(() => undefined);
      throw err;
    }
    async function* all(): AsyncGenerator<string, void, undefined> {
      if (first.done === true) return;
      yield first.value;
      // yield* forwards return(): a destroyed stream closes the cursor through it.
      yield* lines;
    }
    // Also when the client left before the body was piped (the stream then never starts all()).
    ctx.res.once('close', () => {
      lines.return(undefined).catch(() => undefined);
    });
    ctx.type = 'application/x-ndjson';
    ctx.set('Cache-Control', 'no-store');
    ctx.body = Readable.from(all());
  };
}
