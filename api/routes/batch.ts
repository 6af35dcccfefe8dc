import type { ApiContext } from '../state.js';
import { BATCH_ITEM_CODES, type BatchBody, type BatchItemCode, type BatchItemResult } from '../../shared/answers.js';
import { AppError, isAppError } from '../../shared/errors.js';
import { batchItemKind, BatchResponseToNewRecord, FeedbackRecordBody, feedbackBatchBody, FeedbackResponseBody } from '../../shared/schemas.js';
import type { DatasetGate } from '../dataset-gate.js';
import type { EnqueueReceipt } from '../enqueuer.js';
import { idempotentCall, readIdempotencyKey } from '../idempotent-call.js';
import { buildRecordWrite, buildResponseWrite, checkRecordScope, checkResponseTarget, type BuiltWrite, type WriteContext } from '../writes.js';
import { parseBody } from '../parse-input.js';
import { refuseWhenOverloaded, writeContext, type FeedbackRouteDeps } from './feedback.js';

export const FEEDBACK_BATCH_PATH = '/feedback-batch';

/** The status of a processed batch, whatever its items' outcomes: each item carries its own. */
export const BATCH_STATUS = 207;

/** A refusal a single write could get before it is queued: reported at the item's place instead of failing the call. */
function isItemRefusal(err: unknown): err is AppError & { readonly code: BatchItemCode } {
  return isAppError(err) && (BATCH_ITEM_CODES as readonly string[]).includes(err.code);
}

function itemError(index: number, err: AppError & { readonly code: BatchItemCode }): BatchItemResult {
  const error = { code: err.code, message: err.message, ...(err.details === undefined ? {} : { details: [...err.details] }) };
  return { index, status: err.status, error };
}

/**
 * One item checked and minted. A response item with `record_index` answers the record of an
 * earlier accepted item of the same call (`recordIds`: index → record id); the order of a batch
 * is the order of its items, so the record is queued before its responses.
 */
async function buildItem(wc: WriteContext, datasets: DatasetGate, item: unknown, index: number, seed: string | undefined, recordIds: ReadonlyMap<number, string>): Promise<BuiltWrite> {
  const kind = batchItemKind(item);
  if (kind === 'record') {
    const body = parseBody(FeedbackRecordBody, item);
    checkRecordScope(wc.key, body);
    datasets.checkRecordWrite(body.record.feedback_dataset_id, body.record.field_to_value, body.response);
    // Each item of an idempotent call gets its own seed: a retry mints every id again, the same.
    return buildRecordWrite(wc, body, seed === undefined ? undefined : `${seed}\0${index}`);
  }
  let recordId: string;
  let response: FeedbackResponseBody['response'];
  if (kind === 'response_to_batch_record') {
    const body = parseBody(BatchResponseToNewRecord, item);
    if (body.record_index >= index) {
      throw new AppError('validation_failed', 'record_index must be the index of an earlier item', {
        details: [{ path: 'record_index', message: 'must be the index of an earlier item of this batch' }],
      });
    }
    const earlier = recordIds.get(body.record_index);
    if (earlier === undefined) {
      throw new AppError('record_not_found', `item ${body.record_index} is not an accepted record of this batch`);
    }
    recordId = earlier;
    response = body.response;
  } else {
    const body = parseBody(FeedbackResponseBody, item);
    recordId = body.feedback_record_id;
    response = body.response;
  }
  checkResponseTarget(wc, recordId);
  await datasets.checkResponseWrite(recordId, response);
  return buildResponseWrite(wc, recordId, response);
}

/**
 * `POST /feedback-batch`: up to `maxItems` writes in one call. Each item is checked alone; the
 * accepted ones are all queued (each awaited until Redis acknowledged its job) before the 207.
 * If any accepted item could not be queued, the whole call is 503 and nothing is promised: the
 * client retries the whole call with the same Idempotency-Key, which mints the same ids, so items
 * that did reach Redis are stored once.
 */
export function postFeedbackBatch(deps: FeedbackRouteDeps & { readonly maxItems: number }) {
  const envelope = feedbackBatchBody(deps.maxItems);
  return async (ctx: ApiContext): Promise<void> => {
    const { items } = parseBody(envelope, ctx.state.body);
    const idemKey = readIdempotencyKey(ctx);
    refuseWhenOverloaded(deps);
    const wc = writeContext(ctx, deps.ids);
    const answer = await idempotentCall(ctx, deps, { endpoint: 'feedback-batch', body: ctx.state.body, idemKey }, async (seed): Promise<BatchBody> => {
      const results: BatchItemResult[] = [];
      const recordIds = new Map<number, string>();
      const queued: Promise<EnqueueReceipt>[] = [];
      for (const [index, item] of items.entries()) {
        let built: BuiltWrite;
        try {
          built = await buildItem(wc, deps.datasets, item, index, seed, recordIds);
        } catch (err) {
          if (!isItemRefusal(err)) throw err;
          results.push(itemError(index, err));
          continue;
        }
        if (built.write.kind === 'record') recordIds.set(index, built.answer.feedback_record_id);
        // Submitted in item order: the enqueuer mints the acceptance order at submit.
        queued.push(deps.enqueuer.enqueue(built.write, Buffer.byteLength(JSON.stringify(item))));
        results.push({ index, status: 200, result: built.answer });
      }
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
    });
    ctx.body = answer;
    ctx.status = BATCH_STATUS;
  };
}
