import type * as v from 'valibot';
import type { BatchResponseToNewRecord, ErasureBody, FeedbackBatchItem, FeedbackRecordBody, FeedbackResponseBody, FeedbackSuggestionBody } from '../shared/schemas.js';
import type { WebhookEndpointInput as WebhookEndpointInputSchema } from '../shared/webhook-admin.js';

/*
 * The wire types of the client, derived from the valibot schemas the API validates with
 * (shared/schemas.ts) and the answer types the API builds (shared/answers.ts): a change of the
 * contract changes these types, and code written against an older shape stops compiling.
 */

/** Body of `createRecord` (`POST /feedback-record`): a record and its first response. */
export type RecordInput = v.InferInput<typeof FeedbackRecordBody>;
/** Body of `respond` (`POST /feedback-response`). */
export type ResponseInput = v.InferInput<typeof FeedbackResponseBody>;
/** Body of `suggest` (`POST /feedback-suggestion`): a model's suggestion for one question of a record. */
export type SuggestionInput = v.InferInput<typeof FeedbackSuggestionBody>;
/** A batch item answering the record of the earlier item `record_index` of the same batch. */
export type ResponseToBatchRecordInput = v.InferInput<typeof BatchResponseToNewRecord>;
/** One item of `createRecords` (`POST /feedback-batch`). */
export type BatchItemInput = FeedbackBatchItem;

export type { AcceptedBody as Accepted, SuggestionAcceptedBody as SuggestionAccepted, BatchBody as BatchResult, BatchItemResult } from '../shared/answers.js';
export type { ResponseStatus } from '../shared/schemas.js';
export type { ErrorDetail } from '../shared/errors.js';

/** Body of `erase` (`POST /admin/erasures`, admin key): whose feedback to erase (docs/erasure.md). */
export type ErasureInput = v.InferInput<typeof ErasureBody>;
/** The 202 of `erase`, and what `getErasure` (`GET /admin/erasures/{id}`) answers. */
export type { ErasureAccepted, ErasureView } from '../shared/erasures.js';

/** What the read API answers (GET /feedback-record/{id}, /datasets/{id}/records, /datasets/{id}/export, /datasets/{id}/agreement). */
export type { AgreementBody as Agreement, RecordPage, RecordView, ResponseView, SuggestionView } from '../shared/answers.js';
export type { ProgressBody as Progress, RecordHistoryBody as RecordHistory } from '../shared/answers.js';
export type { AgreementLevel } from '../shared/agreement.js';

/**
 * Filters of `listRecords` and `exportRecords` (ANDed). On a listing they are not carried by the
 * cursor: `iterateRecords` repeats them with every page.
 */
export interface RecordFiltersQuery {
  /** Records with this status (`submitted` without a completion rule; `pending` / `completed` with one). */
  readonly status?: 'submitted' | 'pending' | 'completed';
  /** Records with a response by this annotator. */
  readonly user_id?: string;
  /** Records with a response of this status (with `user_id`: that annotator's response). */
  readonly response_status?: 'draft' | 'submitted' | 'discarded';
  /** `metadata[key]` equals the value (sent as `metadata.key=value`; `3` matches 3 and "3", `true` matches true and "true"). */
  readonly metadata?: Readonly<Record<string, string | number | boolean>>;
}

/** Query of `listRecords`. */
export interface ListRecordsQuery extends RecordFiltersQuery {
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

/** Query of `getAgreement` (`GET /datasets/{id}/agreement`). */
export interface AgreementQuery {
  /** The question (`values` key) to measure. */
  readonly question: string;
  /** Default by question type: label nominal, rating ordinal, number interval. */
  readonly level?: 'nominal' | 'ordinal' | 'interval' | 'ratio';
  /** Only these annotators' responses (`user_id`s without commas; at most 100). */
  readonly annotators?: readonly string[];
  /** `completed`: only records whose status is `completed` (the dataset's completion rule). Default `all`. */
  readonly records?: 'all' | 'completed';
  /** Agents' suggestions as observers beside the annotators: `true` for every agent, or these agents (at most 100). */
  readonly include_agents?: true | readonly string[];
}

/** Body of `createWebhook` (`POST /admin/webhooks`). */
export type WebhookEndpointInput = v.InferInput<typeof WebhookEndpointInputSchema>;
export type { WebhookEndpointCreated, WebhookEndpointDeleted, WebhookEndpointList, WebhookEndpointView, DeliveryList as WebhookDeliveryList, DeliveryView as WebhookDelivery, DeliveriesReplayed as WebhookReplay } from '../shared/webhook-admin.js';
export type { WebhookPing } from '../api/routes/webhooks.js';
/** What a webhook receiver gets: the event types and their `data` (verify the body with the `standardwebhooks` package first). */
export type { WebhookEventType, RecordEventData, ResponseEventData, ResponseErasedData, RecordCompletedData } from '../shared/webhook-events.js';

/** Query of `listWebhookDeliveries`. */
export interface WebhookDeliveriesQuery {
  readonly status?: 'pending' | 'queued' | 'delivered' | 'failed' | 'held' | 'superseded';
  /** 1–500, default 50. */
  readonly limit?: number;
}
