import { BATCH_ITEM_CODES, type BatchBody, type BatchItemCode, type BatchItemResult } from '../shared/answers.js';
import { AppError, isAppError } from '../shared/errors.js';
import type { IdMinter } from '../shared/ids.js';
import type { Logger } from '../shared/logger.js';
import { batchItemKind, BatchResponseToNewRecord, feedbackBatchBody, type FeedbackResponseBody } from '../shared/schemas.js';
import type { BacklogMonitor } from './backlog.js';
import type { DatasetGate } from './dataset-gate.js';
import { overloadedRetryAfterSeconds, type EnqueueOptions, type EnqueueReceipt, type Enqueuer } from './enqueuer.js';
import type { IdempotencyStore } from './idempotency.js';
import { idempotentCall, readIdempotencyKey } from './idempotent-call.js';
import { parseBody } from './parse-input.js';
import { authenticatedKey, type ApiContext } from './state.js';
import { acceptedAnswer, recordWrite, responseWrite, suggestionWrite, type BuiltWrite, type WriteContext, type WriteKind } from './write-kinds.js';

/*
 * The one write pipeline: a request body becomes queued writes through the declarations of
 * api/write-kinds.ts, in the same steps for the single endpoints and the batch. Per write: parse
 * (every problem with its path), check (scope, dataset definition), then under the idempotency
 * protocol mint the ids, enqueue and answer once Redis acknowledged the job.
 */

export const FEEDBACK_BATCH_PATH = '/feedback-batch';

/** The status of a processed batch, whatever its items' outcomes: each item carries its own. */
export const BATCH_STATUS = 207;

export interface WritePipelineDeps {
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

export interface WritePipeline {
  /** The route of a kind's own endpoint: one write, answered 200 with its ids. */
  one<B>(kind: WriteKind<B, unknown>): (ctx: ApiContext) => Promise<void>;
  /**
   * The route of `POST /feedback-batch`: up to `maxItems` writes of any kind, answered 207. An item
   * whose JSON is larger than `maxItemBytes` (the single calls' `BODY_LIMIT_BYTES`) is refused at
   * its place with 413 `payload_too_large`, as its single call would be.
   */
  batch(maxItems: number, maxItemBytes: number): (ctx: ApiContext) => Promise<void>;
}

export function createWritePipeline(deps: WritePipelineDeps): WritePipeline {
  const context = (ctx: ApiContext): WriteContext => ({
    key: authenticatedKey(ctx),
    token: ctx.state.feedbackToken,
    requestId: ctx.state.requestId,
    ids: deps.ids,
    datasets: deps.datasets,
  });

  /** 503 `overloaded` while the backlog is above its ceiling: checked before any write of a call. */
  function refuseWhenOverloaded(): void {
    if (deps.backlog.state().overloaded) {
      throw new AppError('overloaded', 'the backlog is above its ceiling; retry later', {
        headers: { 'Retry-After': String(overloadedRetryAfterSeconds(deps.retryAfterSeconds)) },
      });
    }
  }

  /** The enqueuer's promise itself unless debug lines are on (no promise layer of its own per write). */
  function enqueue(ctx: ApiContext, built: BuiltWrite<unknown>, bodyBytes: number, options: EnqueueOptions = {}): Promise<EnqueueReceipt> {
    const queued = deps.enqueuer.enqueue(built.write, bodyBytes, options);
    if (!deps.logger.isLevelEnabled('debug')) return queued;
    return queued.then((receipt) => {
      ctx.state.log.debug({ job_id: receipt.jobId, index: receipt.index, seq: receipt.seq, record_id: built.write.record_id }, 'write queued');
      return receipt;
    });
  }

  return {
    one(kind) {
      return async (ctx) => {
        const wc = context(ctx);
        const body = parseBody(kind.schema, ctx.state.body);
        // Most checks are synchronous: awaited only when one returns a promise.
        const checking = kind.check(body, wc);
        if (checking !== undefined) await checking;
        const idemKey = readIdempotencyKey(ctx);
        refuseWhenOverloaded();
        ctx.body = await idempotentCall(ctx, deps, { endpoint: kind.endpoint, body: ctx.state.body, idemKey }, async (seed) => {
          const built = kind.build(body, wc, seed);
          // Ids not fixed by an Idempotency-Key may be minted again, to move a new record off a
          // Redis shard that stopped answering; the answer gives the ids as queued.
          const remint = seed === undefined ? () => kind.build(body, wc, undefined).write : undefined;
          const receipt = await enqueue(ctx, built, ctx.state.bodyBytes ?? 0, remint === undefined ? {} : { remint });
          return kind.accepted === undefined ? acceptedAnswer(receipt.write) : kind.accepted.answer(receipt.write);
        });
        if (kind.accepted !== undefined) ctx.status = kind.accepted.status;
      };
    },

    batch(maxItems, maxItemBytes) {
      const envelope = feedbackBatchBody(maxItems);
      return async (ctx) => {
        const { items } = parseBody(envelope, ctx.state.body);
        const idemKey = readIdempotencyKey(ctx);
        refuseWhenOverloaded();
        const wc = context(ctx);
        ctx.body = await idempotentCall(ctx, deps, { endpoint: 'feedback-batch', body: ctx.state.body, idemKey }, (seed) => acceptItems(ctx, wc, items, seed, maxItemBytes));
        ctx.status = BATCH_STATUS;
      };
    },
  };

  /**
   * Each item checked alone; the accepted ones are all queued (each awaited until Redis
   * acknowledged its job) before the 207. If any accepted item could not be queued, the whole
   * call is 503 and nothing is promised: the client retries the whole call with the same
   * Idempotency-Key, which mints the same ids, so items that did reach Redis are stored once.
   */
  async function acceptItems(ctx: ApiContext, wc: WriteContext, items: readonly unknown[], seed: string | undefined, maxItemBytes: number): Promise<BatchBody> {
    const results: BatchItemResult[] = [];
    const recordIds = new Map<number, string>();
    const accepted: { built: BuiltWrite; bytes: number }[] = [];
    for (const [index, item] of items.entries()) {
      let built: BuiltWrite;
      // What the single call would have read: a batch is not a way around BODY_LIMIT_BYTES (nor,
      // with it, around the store's 16 MiB document limit: an item accepted here must be storable).
      const itemBytes = Buffer.byteLength(JSON.stringify(item));
      if (itemBytes > maxItemBytes) {
        results.push(itemError(index, new AppError('payload_too_large', `the item is ${itemBytes} bytes of JSON, larger than the limit of a single call (${maxItemBytes} bytes, BODY_LIMIT_BYTES)`) as AppError & { readonly code: BatchItemCode }));
        continue;
      }
      try {
        // Each item of an idempotent call gets its own seed: a retry mints every id again, the same.
        built = await prepareItem(wc, item, index, seed === undefined ? undefined : `${seed}\0${index}`, recordIds);
      } catch (err) {
        if (!isItemRefusal(err)) throw err;
        results.push(itemError(index, err));
        continue;
      }
      if (built.write.kind === 'record') recordIds.set(index, built.answer.feedback_record_id);
      accepted.push({ built, bytes: itemBytes });
      results.push({ index, status: 200, result: built.answer });
    }
    // Every item checked first, then all submitted at once, in item order (the enqueuer mints the
    // acceptance order at submit): checking thousands of items takes the event loop for a while,
    // and a write must not spend its ENQUEUE_TIMEOUT_MS waiting for its own call's checks.
    const queued = accepted.map(({ built, bytes }) => enqueue(ctx, built, bytes));
    const outcomes = await Promise.allSettled(queued);
    const failures = outcomes.filter((o): o is PromiseRejectedResult => o.status === 'rejected');
    if (failures.length > 0) {
      const first = failures[0]!.reason as unknown;
      if (!isAppError(first)) throw first;
      throw new AppError(first.code, `${failures.length} of ${queued.length} accepted items were not acknowledged by Redis (${first.message}); nothing is promised: retry the whole call with the same Idempotency-Key`, {
        headers: { ...first.headers },
        cause: first,
      });
    }
    return { accepted: queued.length, rejected: results.length - queued.length, items: results };
  }
}

/**
 * One batch item through its kind's declaration. A response item with `record_index` answers
 * the record of an earlier accepted item of the same call (`recordIds`: index → record id): it
 * becomes a response body for that record; the order of a batch is the order of its items, so
 * the record is queued before its responses.
 */
async function prepareItem(wc: WriteContext, item: unknown, index: number, seed: string | undefined, recordIds: ReadonlyMap<number, string>): Promise<BuiltWrite> {
  const kind = batchItemKind(item);
  if (kind === 'record') return prepare(recordWrite, parseBody(recordWrite.schema, item), wc, seed);
  if (kind === 'response') return prepare(responseWrite, parseBody(responseWrite.schema, item), wc, seed);
  if (kind === 'suggestion') return prepare(suggestionWrite, parseBody(suggestionWrite.schema, item), wc, seed);
  const body = parseBody(BatchResponseToNewRecord, item);
  if (body.record_index >= index) {
    throw new AppError('validation_failed', 'record_index must be the index of an earlier item', {
      details: [{ path: 'record_index', message: 'must be the index of an earlier item of this batch' }],
    });
  }
  const earlier = recordIds.get(body.record_index);
  if (earlier === undefined) throw new AppError('record_not_found', `item ${body.record_index} is not an accepted record of this batch`);
  const resolved: FeedbackResponseBody = { feedback_record_id: earlier, response: body.response };
  return prepare(responseWrite, resolved, wc, seed);
}

async function prepare<B>(kind: WriteKind<B>, body: B, wc: WriteContext, seed: string | undefined): Promise<BuiltWrite> {
  await kind.check(body, wc);
  return kind.build(body, wc, seed);
}

/** A refusal a single write could get before it is queued: reported at the item's place instead of failing the call. */
function isItemRefusal(err: unknown): err is AppError & { readonly code: BatchItemCode } {
  return isAppError(err) && (BATCH_ITEM_CODES as readonly string[]).includes(err.code);
}

function itemError(index: number, err: AppError & { readonly code: BatchItemCode }): BatchItemResult {
  const error = { code: err.code, message: err.message, ...(err.details === undefined ? {} : { details: [...err.details] }) };
  return { index, status: err.status, error };
}
