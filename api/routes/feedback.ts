import type { Context } from 'koa';
import * as v from 'valibot';
import { AppError } from '../../shared/errors.js';
import type { IdMinter } from '../../shared/ids.js';
import type { Logger } from '../../shared/logger.js';
import {
  FeedbackRecordBody,
  FeedbackResponseBody,
  toDetails,
  ResponseStatus,
  type Write,
} from '../../shared/schemas.js';
import type { BacklogMonitor } from '../backlog.js';
import type { Enqueuer } from '../enqueuer.js';
import { isValidIdempotencyKey, requestFingerprint, type IdempotencyStore } from '../idempotency.js';
import { mayWriteDataset, type AuthenticatedKey } from '../middleware/auth.js';

/** The 200 body of both write endpoints (documented in OpenAPI; the routes build it). */
export const AcceptedBody = v.object({
  feedback_record_id: v.pipe(v.string(), v.description('Minted by the API before queueing; usable at once with POST /feedback-response.')),
  feedback_response_id: v.pipe(v.string(), v.description('The same for the same (record, annotator): a later call updates that response.')),
  status: ResponseStatus,
});
export type AcceptedBody = v.InferOutput<typeof AcceptedBody>;

interface FeedbackRouteDeps {
  /** The root logger: tells whether debug lines are on without making the request's child logger. */
  readonly logger: Logger;
  readonly enqueuer: Enqueuer;
  readonly idempotency: IdempotencyStore;
  readonly ids: IdMinter;
  readonly backlog: BacklogMonitor;
  readonly retryAfterSeconds: number;
}

function parse<S extends v.GenericSchema>(schema: S, input: unknown): v.InferOutput<S> {
  const result = v.safeParse(schema, input, { abortEarly: false });
  if (result.success) return result.output;
  const details = toDetails(result.issues);
  const first = details[0]!;
  throw new AppError('validation_failed', `${first.path} ${first.message}`, { details });
}

/** Size of the request body in bytes (set by the jsonBody middleware), for the enqueuer's limits. */
function bodyBytes(ctx: Context): number {
  const bytes: unknown = ctx.state['bodyBytes'];
  return typeof bytes === 'number' ? bytes : 0;
}

function idempotencyKey(ctx: Context): string | undefined {
  const raw = ctx.req.headers['idempotency-key'];
  if (raw === undefined) return undefined;
  if (Array.isArray(raw) || !isValidIdempotencyKey(raw)) {
    throw new AppError('invalid_header', 'Idempotency-Key must be one header of 1 to 255 printable characters');
  }
  return raw;
}

/**
 * What both endpoints share: the backlog ceiling, the idempotency protocol, enqueueing, the 200.
 * `build` mints the write; `seed` is set on replays-by-key so that a retry after a lost answer
 * mints the same ids and the worker's upserts store one document.
 */
async function accept(
  ctx: Context,
  deps: FeedbackRouteDeps,
  endpoint: string,
  body: unknown,
  build: (seed: string | undefined) => { write: Write; answer: AcceptedBody },
): Promise<void> {
  const key = ctx.state['apiKey'] as AuthenticatedKey;
  const idemKey = idempotencyKey(ctx);
  if (deps.backlog.state().overloaded) {
    throw new AppError('overloaded', 'the backlog is above its ceiling; retry later', {
      headers: { 'Retry-After': String(deps.retryAfterSeconds * 5) },
    });
  }
  if (idemKey === undefined) {
    const { write, answer } = build(undefined);
    const receipt = await deps.enqueuer.enqueue(write, bodyBytes(ctx));
    if (deps.logger.isLevelEnabled('debug')) (ctx.state['log'] as Logger).debug({ job_id: receipt.jobId, index: receipt.index, seq: receipt.seq, record_id: answer.feedback_record_id }, 'write queued');
    ctx.body = answer;
    return;
  }

  const fingerprint = requestFingerprint(endpoint, body);
  let begun;
  try {
    begun = await deps.idempotency.begin(key.name, idemKey, fingerprint);
  } catch (err) {
    throw new AppError('queue_unavailable', 'the write could not be queued; retry later', {
      headers: { 'Retry-After': String(deps.retryAfterSeconds) },
      cause: err,
    });
  }
  switch (begun.state) {
    case 'replay':
      ctx.set('Idempotent-Replayed', 'true');
      ctx.body = begun.body;
      return;
    case 'reused':
      throw new AppError('idempotency_key_reused', 'this Idempotency-Key was used with a different request');
    case 'in_use':
      throw new AppError('idempotency_key_in_use', 'a request with this Idempotency-Key is still running; retry shortly', {
        headers: { 'Retry-After': '1' },
      });
    case 'new':
      break;
  }
  const { write, answer } = build(`${key.name}\0${idemKey}\0${fingerprint}`);
  try {
    await deps.enqueuer.enqueue(write, bodyBytes(ctx));
  } catch (err) {
    await deps.idempotency.abort(key.name, idemKey).catch(() => undefined);
    throw err;
  }
  // The write is queued: if keeping the replay body fails, the claim expires and a retry mints
  // the same ids (seeded), which the worker stores once.
  await deps.idempotency.complete(key.name, idemKey, fingerprint, answer).catch((err: unknown) => {
    (ctx.state['log'] as Logger).warn({ err: (err as Error).message }, 'could not keep the idempotent answer');
  });
  ctx.body = answer;
}

export function postFeedbackRecord(deps: FeedbackRouteDeps) {
  return async (ctx: Context): Promise<void> => {
    const body = parse(FeedbackRecordBody, ctx.state['body']);
    const key = ctx.state['apiKey'] as AuthenticatedKey;
    if (!mayWriteDataset(key, body.record.feedback_dataset_id)) {
      throw new AppError('forbidden', `this API key may not write to the dataset ${JSON.stringify(body.record.feedback_dataset_id)}`);
    }
    await accept(ctx, deps, 'feedback-record', ctx.state['body'], (seed) => {
      const datasetId = body.record.feedback_dataset_id;
      const recordId = seed === undefined ? deps.ids.newRecordId(datasetId) : deps.ids.recordIdFromSeed(seed, datasetId);
      const userId = body.response.user_id ?? key.name;
      const responseId = deps.ids.responseId(recordId, userId);
      const write: Write = {
        kind: 'record',
        request_id: ctx.state['requestId'] as string,
        accepted_at: Date.now(),
        api_key: key.name,
        record_id: recordId,
        response_id: responseId,
        record: body.record,
        response: { status: body.response.status, values: body.response.values, user_id: userId },
      };
      return { write, answer: { feedback_record_id: recordId, feedback_response_id: responseId, status: body.response.status } };
    });
  };
}

export function postFeedbackResponse(deps: FeedbackRouteDeps) {
  return async (ctx: Context): Promise<void> => {
    const body = parse(FeedbackResponseBody, ctx.state['body']);
    const key = ctx.state['apiKey'] as AuthenticatedKey;
    if (!deps.ids.isMintedRecordId(body.feedback_record_id)) {
      throw new AppError('record_not_found', 'no record has this feedback_record_id');
    }
    // The record may still be queued, so its dataset is read from the fingerprint in its id.
    // Ids minted before fingerprints existed match no dataset: scoped keys cannot answer them.
    if (key.datasets !== null && !key.datasets.some((d) => deps.ids.datasetMatches(body.feedback_record_id, d))) {
      throw new AppError('forbidden', 'this API key may not write to the dataset of this record');
    }
    await accept(ctx, deps, 'feedback-response', ctx.state['body'], () => {
      const userId = body.response.user_id ?? key.name;
      const responseId = deps.ids.responseId(body.feedback_record_id, userId);
      const write: Write = {
        kind: 'response',
        request_id: ctx.state['requestId'] as string,
        accepted_at: Date.now(),
        api_key: key.name,
        record_id: body.feedback_record_id,
        response_id: responseId,
        response: { status: body.response.status, values: body.response.values, user_id: userId },
      };
      return { write, answer: { feedback_record_id: body.feedback_record_id, feedback_response_id: responseId, status: body.response.status } };
    });
  };
}
