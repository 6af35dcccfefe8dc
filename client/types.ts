import type * as v from 'valibot';
import type { BatchResponseToNewRecord, FeedbackBatchItem, FeedbackRecordBody, FeedbackResponseBody } from '../shared/schemas.js';

/*
 * The wire types of the client, derived from the valibot schemas the API validates with
 * (shared/schemas.ts) and the answer types the API builds (shared/answers.ts): a change of the
 * contract changes these types, and code written against an older shape stops compiling.
 */

/** Body of `createRecord` (`POST /feedback-record`): a record and its first response. */
export type RecordInput = v.InferInput<typeof FeedbackRecordBody>;
/** Body of `respond` (`POST /feedback-response`). */
export type ResponseInput = v.InferInput<typeof FeedbackResponseBody>;
/** A batch item answering the record of the earlier item `record_index` of the same batch. */
export type ResponseToBatchRecordInput = v.InferInput<typeof BatchResponseToNewRecord>;
/** One item of `createRecords` (`POST /feedback-batch`). */
export type BatchItemInput = FeedbackBatchItem;

export type { AcceptedBody as Accepted, BatchBody as BatchResult, BatchItemResult } from '../shared/answers.js';
export type { ResponseStatus } from '../shared/schemas.js';
export type { ErrorDetail } from '../shared/errors.js';

/*
 * The read API (GET /feedback-record/{id}, /datasets/{id}/records, /datasets/{id}/export) is
 * being built on another branch; these mirror its shapes as of this writing (api/reads.ts there)
 * and move to one shared declaration when it is merged.
 */

/** A response as the read endpoints show it. */
export interface ResponseView {
  readonly feedback_response_id: string;
  readonly user_id: string;
  readonly status: string;
  readonly values: Record<string, unknown>;
  /** ISO 8601. */
  readonly created_at: string;
  /** ISO 8601. */
  readonly updated_at: string;
}

/** A stored record with its responses (unless a listing left them out). */
export interface RecordView {
  readonly feedback_record_id: string;
  readonly feedback_dataset_id: string;
  readonly field_to_value: Record<string, unknown>;
  readonly external_id?: string;
  readonly metadata?: Record<string, unknown>;
  readonly status: string;
  readonly created_at: string;
  readonly updated_at: string;
  readonly responses?: readonly ResponseView[];
}

/** One page of `GET /datasets/{id}/records`. */
export interface RecordPage {
  readonly items: readonly RecordView[];
  /** Pass as `cursor` for the next page; null at the end. */
  readonly next_cursor: string | null;
}

/** Query of `listRecords`. */
export interface ListRecordsQuery {
  /** Default `newest`. */
  readonly order?: 'newest' | 'oldest';
  /** 1–500, default 50. */
  readonly limit?: number;
  /** Records whose responses changed since then (ISO 8601 with offset, or a Date). */
  readonly updated_since?: string | Date;
  /** Include responses (default true). */
  readonly responses?: boolean;
  /** `next_cursor` of the previous page. */
  readonly cursor?: string;
}
