import type { ErrorDetail } from './errors.js';
import type { ResponseStatus } from './schemas.js';

/*
 * The success bodies of the write endpoints: built by the API (api/writes.ts, api/routes/batch.ts),
 * documented by api/openapi.ts (checked against these types), read by client/.
 */

/** The 200 body of `POST /feedback-record` and `POST /feedback-response`, and the `result` of an accepted batch item. */
export interface AcceptedBody {
  readonly feedback_record_id: string;
  readonly feedback_response_id: string;
  readonly status: ResponseStatus;
}

/** One batch item's outcome, at its place in the answer: `status` is what a single call would have answered. */
export type BatchItemResult =
  | { readonly index: number; readonly status: 200; readonly result: AcceptedBody }
  | { readonly index: number; readonly status: number; readonly error: { readonly code: string; readonly message: string; readonly details?: readonly ErrorDetail[] } };

/** The 207 body of `POST /feedback-batch`. */
export interface BatchBody {
  /** Items queued (durably, in Redis) by this call. */
  readonly accepted: number;
  /** Items refused, each with its error. */
  readonly rejected: number;
  readonly items: readonly BatchItemResult[];
}
