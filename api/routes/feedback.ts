import type { Context } from 'koa';
import { AppError } from '../../shared/errors.js';
import type { IdMinter } from '../../shared/ids.js';
import type { Logger } from '../../shared/logger.js';
import { FeedbackRecordBody, FeedbackResponseBody } from '../../shared/schemas.js';
import type { BacklogMonitor } from '../backlog.js';
import type { Enqueuer } from '../enqueuer.js';
import type { IdempotencyStore } from '../idempotency.js';
import { bodyBytes, idempotentCall, readIdempotencyKey } from '../idempotent-call.js';
import type { AuthenticatedKey } from '../middleware/auth.js';
import { buildRecordWrite, buildResponseWrite, checkRecordScope, checkResponseTarget, parseBody, type BuiltWrite, type WriteContext } from '../writes.js';

export type { AcceptedBody } from '../writes.js';

export interface FeedbackRouteDeps {
  /** The root logger: tells whether debug lines are on without making the request's child logger. */
  readonly logger: Logger;
  readonly enqueuer: Enqueuer;
  readonly idempotency: IdempotencyStore;
  readonly ids: IdMinter;
  readonly backlog: BacklogMonitor;
  readonly retryAfterSeconds: number;
}

/** 503 `overloaded` while the backlog is above its ceiling: checked before any write of a call. */
export function refuseWhenOverloaded(deps: Pick<FeedbackRouteDeps, 'backlog' | 'retryAfterSeconds'>): void {
  if (deps.backlog.state().overloaded) {
    throw new AppError('overloaded', 'the backlog is above its ceiling; retry later', {
      headers: { 'Retry-After': String(deps.retryAfterSeconds * 5) },
    });
  }
}

export function writeContext(ctx: Context, ids: IdMinter): WriteContext {
  return { key: ctx.state['apiKey'] as AuthenticatedKey, requestId: ctx.state['requestId'] as string, ids };
}

/**
 * What both single-write endpoints share: the backlog ceiling, the idempotency protocol,
 * enqueueing, the 200. `build` mints the write from the seed of an idempotent call.
 */
async function accept(ctx: Context, deps: FeedbackRouteDeps, endpoint: string, build: (seed: string | undefined) => BuiltWrite): Promise<void> {
  const idemKey = readIdempotencyKey(ctx);
  refuseWhenOverloaded(deps);
  ctx.body = await idempotentCall(ctx, deps, { endpoint, body: ctx.state['body'], idemKey }, async (seed) => {
    const { write, answer } = build(seed);
    const receipt = await deps.enqueuer.enqueue(write, bodyBytes(ctx));
    if (deps.logger.isLevelEnabled('debug')) (ctx.state['log'] as Logger).debug({ job_id: receipt.jobId, index: receipt.index, seq: receipt.seq, record_id: answer.feedback_record_id }, 'write queued');
    return answer;
  });
}

export function postFeedbackRecord(deps: FeedbackRouteDeps) {
  return async (ctx: Context): Promise<void> => {
    const body = parseBody(FeedbackRecordBody, ctx.state['body']);
    const wc = writeContext(ctx, deps.ids);
    checkRecordScope(wc.key, body);
    await accept(ctx, deps, 'feedback-record', (seed) => buildRecordWrite(wc, body, seed));
  };
}

export function postFeedbackResponse(deps: FeedbackRouteDeps) {
  return async (ctx: Context): Promise<void> => {
    const body = parseBody(FeedbackResponseBody, ctx.state['body']);
    const wc = writeContext(ctx, deps.ids);
    checkResponseTarget(wc, body.feedback_record_id);
    await accept(ctx, deps, 'feedback-response', () => buildResponseWrite(wc, body.feedback_record_id, body.response));
  };
}
