import type { Context } from 'koa';
import * as v from 'valibot';
import { AppError } from '../../shared/errors.js';
import type { IdMinter } from '../../shared/ids.js';
import type { Logger } from '../../shared/logger.js';
import {
  FeedbackRecordBody,
  FeedbackResponseBody,
  toDetails,
  type ResponseStatus,
  type Write,
} from '../../shared/schemas.js';
import type { BacklogMonitor } from '../backlog.js';
import type { DatasetGate } from '../dataset-gate.js';
import type { Enqueuer } from '../enqueuer.js';
import { isValidIdempotencyKey, requestFingerprint, type IdempotencyStore } from '../idempotency.js';
import type { FeedbackTokenScope } from '../feedback-tokens.js';
import { feedbackTokenOf, mayWriteDataset, type AuthenticatedKey } from '../middleware/auth.js';

/** The 200 body of both write endpoints. */
export interface AcceptedBody {
  readonly feedback_record_id: string;
  readonly feedback_response_id: string;
  readonly status: ResponseStatus;
}

interface FeedbackRouteDeps {
  /** The root logger: tells whether debug lines are on without making the request's child logger. */
  readonly logger: Logger;
  readonly enqueuer: Enqueuer;
  readonly idempotency: IdempotencyStore;
  readonly ids: IdMinter;
  readonly backlog: BacklogMonitor;
  readonly retryAfterSeconds: number;
  /** Checks fields and questions against the dataset's definition, before anything is queued. */
  readonly datasets: DatasetGate;
}

/** `input` checked against `schema`, or 400 `validation_failed` listing every problem. */
export function parse<S extends v.GenericSchema>(schema: S, input: unknown): v.InferOutput<S> {
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
 * 404 unless `recordId` was minted here; 403 unless `key` may write its dataset. The record may
 * still be queued, so its dataset is read from the fingerprint in its id. Ids minted before
 * fingerprints existed match no dataset: scoped keys cannot answer them.
 */
export function checkRecordWritable(ids: IdMinter, key: AuthenticatedKey, recordId: string): void {
  if (!ids.isMintedRecordId(recordId)) {
    throw new AppError('record_not_found', 'no record has this feedback_record_id');
  }
  if (key.datasets !== null && !key.datasets.some((d) => ids.datasetMatches(recordId, d))) {
    throw new AppError('forbidden', 'this API key may not write to the dataset of this record');
  }
}

/** 403 `token_out_of_scope` unless the token covers this record, annotator and every `values` key. */
function checkTokenScope(token: FeedbackTokenScope, body: FeedbackResponseBody): void {
  if (body.feedback_record_id !== token.recordId) {
    throw new AppError('token_out_of_scope', 'this feedback token may answer only the record it was made for');
  }
  if (body.response.user_id !== undefined && body.response.user_id !== token.userId) {
    throw new AppError('token_out_of_scope', `this feedback token writes as user_id ${JSON.stringify(token.userId)} only`);
  }
  if (token.questions !== null) {
    const allowed = token.questions;
    const outside = Object.keys(body.response.values).filter((name) => !allowed.includes(name));
    if (outside.length > 0) {
      throw new AppError('token_out_of_scope', `this feedback token may not answer ${outside.slice(0, 5).map((n) => JSON.stringify(n)).join(', ')}${outside.length > 5 ? ', …' : ''}`);
    }
  }
}

/**
 * Whose `Idempotency-Key`s a request's key lives among: the API key's, or for a feedback token
 * its (minting key, record, annotator), so that two browsers sharing a minting key never replay
 * each other's answers. `\0` cannot occur in key names.
 */
function idempotencyOwner(ctx: Context): string {
  const key = ctx.state['apiKey'] as AuthenticatedKey;
  const token = feedbackTokenOf(ctx.state);
  return token === undefined ? key.name : `${key.name}\0token\0${token.recordId}\0${token.userId}`;
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
  const owner = idempotencyOwner(ctx);
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
    begun = await deps.idempotency.begin(owner, idemKey, fingerprint);
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
  const { write, answer } = build(`${owner}\0${idemKey}\0${fingerprint}`);
  try {
    await deps.enqueuer.enqueue(write, bodyBytes(ctx));
  } catch (err) {
    await deps.idempotency.abort(owner, idemKey).catch(() => undefined);
    throw err;
  }
  // The write is queued: if keeping the replay body fails, the claim expires and a retry mints
  // the same ids (seeded), which the worker stores once.
  await deps.idempotency.complete(owner, idemKey, fingerprint, answer).catch((err: unknown) => {
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
    deps.datasets.checkRecordWrite(body.record.feedback_dataset_id, body.record.field_to_value, body.response);
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
    const token = feedbackTokenOf(ctx.state);
    // A token's record was checked against its minting key's datasets when it was minted.
    if (token === undefined) checkRecordWritable(deps.ids, key, body.feedback_record_id);
    else checkTokenScope(token, body);
    await deps.datasets.checkResponseWrite(body.feedback_record_id, body.response);
    await accept(ctx, deps, 'feedback-response', ctx.state['body'], () => {
      const userId = token?.userId ?? body.response.user_id ?? key.name;
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
