import { authenticatedKey, type ApiContext } from '../state.js';
import type { Logger } from '../../shared/logger.js';
import { AppError } from '../../shared/errors.js';
import type { IdMinter } from '../../shared/ids.js';
import { FeedbackRecordBody, FeedbackResponseBody } from '../../shared/schemas.js';
import type { BacklogMonitor } from '../backlog.js';
import type { DatasetGate } from '../dataset-gate.js';
import { overloadedRetryAfterSeconds, type Enqueuer } from '../enqueuer.js';
import type { IdempotencyStore } from '../idempotency.js';
import { bodyBytes, idempotentCall, readIdempotencyKey } from '../idempotent-call.js';
import type { FeedbackTokenScope } from '../feedback-tokens.js';
import { buildRecordWrite, buildResponseWrite, checkRecordScope, checkResponseTarget, type BuiltWrite, type WriteContext } from '../writes.js';
import { parseBody } from '../parse-input.js';

export interface FeedbackRouteDeps {
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

/** 503 `overloaded` while the backlog is above its ceiling: checked before any write of a call. */
export function refuseWhenOverloaded(deps: Pick<FeedbackRouteDeps, 'backlog' | 'retryAfterSeconds'>): void {
  if (deps.backlog.state().overloaded) {
    throw new AppError('overloaded', 'the backlog is above its ceiling; retry later', {
      headers: { 'Retry-After': String(overloadedRetryAfterSeconds(deps.retryAfterSeconds)) },
    });
  }
}

export function writeContext(ctx: ApiContext, ids: IdMinter): WriteContext {
  return { key: authenticatedKey(ctx), requestId: ctx.state.requestId, ids };
}

/**
 * What both single-write endpoints share: the backlog ceiling, the idempotency protocol,
 * enqueueing, the 200. `build` mints the write from the seed of an idempotent call.
 */
async function accept(ctx: ApiContext, deps: FeedbackRouteDeps, endpoint: string, build: (seed: string | undefined) => BuiltWrite): Promise<void> {
  const idemKey = readIdempotencyKey(ctx);
  refuseWhenOverloaded(deps);
  ctx.body = await idempotentCall(ctx, deps, { endpoint, body: ctx.state.body, idemKey }, async (seed) => {
    const { write, answer } = build(seed);
    const receipt = await deps.enqueuer.enqueue(write, bodyBytes(ctx));
    if (deps.logger.isLevelEnabled('debug')) ctx.state.log.debug({ job_id: receipt.jobId, index: receipt.index, seq: receipt.seq, record_id: answer.feedback_record_id }, 'write queued');
    return answer;
  });
}

export function postFeedbackRecord(deps: FeedbackRouteDeps) {
  return async (ctx: ApiContext): Promise<void> => {
    const body = parseBody(FeedbackRecordBody, ctx.state.body);
    const wc = writeContext(ctx, deps.ids);
    checkRecordScope(wc.key, body);
    deps.datasets.checkRecordWrite(body.record.feedback_dataset_id, body.record.field_to_value, body.response);
    await accept(ctx, deps, 'feedback-record', (seed) => buildRecordWrite(wc, body, seed));
  };
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

export function postFeedbackResponse(deps: FeedbackRouteDeps) {
  return async (ctx: ApiContext): Promise<void> => {
    const body = parseBody(FeedbackResponseBody, ctx.state.body);
    const wc = writeContext(ctx, deps.ids);
    const token = ctx.state.feedbackToken;
    // A token's record was checked against its minting key's datasets when it was minted.
    if (token === undefined) checkResponseTarget(wc, body.feedback_record_id);
    else checkTokenScope(token, body);
    await deps.datasets.checkResponseWrite(body.feedback_record_id, body.response);
    const response = token === undefined ? body.response : { ...body.response, user_id: token.userId };
    await accept(ctx, deps, 'feedback-response', () => buildResponseWrite(wc, body.feedback_record_id, response));
  };
}
