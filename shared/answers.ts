import * as v from 'valibot';
import { ErrorDetail, type ErrorCode } from './errors.js';
import { ResponseStatus } from './schemas.js';

/*
 * The success bodies of the write endpoints: built by the API (api/writes.ts, api/routes/batch.ts),
 * documented by api/openapi.ts (converted from these schemas), read by client/ (types only).
 */

/** The 200 body of `POST /feedback-record` and `POST /feedback-response`, and the `result` of an accepted batch item. */
export const AcceptedBody = v.object({
  feedback_record_id: v.pipe(v.string(), v.description('Minted by the API before queueing; usable at once with POST /feedback-response.')),
  feedback_response_id: v.pipe(v.string(), v.description('The same for the same (record, annotator): a later call updates that response.')),
  status: ResponseStatus,
});
export type AcceptedBody = v.InferOutput<typeof AcceptedBody>;

/** What a batch item can be refused with: the refusals of the checks a single write passes before it is queued. */
export const BATCH_ITEM_CODES = ['validation_failed', 'forbidden', 'record_not_found', 'dataset_not_found'] as const satisfies readonly ErrorCode[];
export type BatchItemCode = (typeof BATCH_ITEM_CODES)[number];

const ItemIndex = v.pipe(v.number(), v.integer(), v.minValue(0), v.description('The index of the item in the request.'));

/** One batch item's outcome, at its place in the answer: `status` is what a single call would have answered. */
const BatchItemResult = v.union([
  v.object({ index: ItemIndex, status: v.literal(200), result: AcceptedBody }),
  v.object({
    index: ItemIndex,
    status: v.pipe(v.number(), v.integer(), v.description('The HTTP status a single call would have had: 400, 403 or 404.')),
    error: v.object({ code: v.picklist(BATCH_ITEM_CODES), message: v.string(), details: v.exactOptional(v.array(ErrorDetail)) }),
  }),
]);
export type BatchItemResult = v.InferOutput<typeof BatchItemResult>;

/** The 207 body of `POST /feedback-batch`. */
export const BatchBody = v.object({
  accepted: v.pipe(v.number(), v.integer(), v.minValue(0), v.description('Items queued by this call (in Redis, acknowledged).')),
  rejected: v.pipe(v.number(), v.integer(), v.minValue(0), v.description('Items refused, each with its error.')),
  items: v.pipe(v.array(BatchItemResult), v.description('One result per item, in the order of the items.')),
});
export type BatchBody = v.InferOutput<typeof BatchBody>;
