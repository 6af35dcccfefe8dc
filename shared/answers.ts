import * as v from 'valibot';
import { ErrorCode, ErrorDetail } from './errors.js';
import { ResponseStatus } from './schemas.js';
import { AGREEMENT_LEVELS } from './agreement.js';
import { CompletionRule } from './dataset-definition.js';

/*
 * The success bodies of the write endpoints: built by the API (api/write-kinds.ts, api/write-pipeline.ts),
 * documented by api/openapi.ts (converted from these schemas), read by client/ (types only).
 */

/** The 200 body of `POST /feedback-record` and `POST /feedback-response`, and the `result` of an accepted batch item. */
export const AcceptedBody = v.object({
  feedback_record_id: v.pipe(v.string(), v.description('Minted by the API before queueing; usable at once with POST /feedback-response.')),
  feedback_response_id: v.pipe(v.string(), v.description('The same for the same (record, annotator): a later call updates that response.')),
  status: ResponseStatus,
});
export type AcceptedBody = v.InferOutput<typeof AcceptedBody>;

/** The 200 body of `POST /feedback-suggestion`, and the `result` of an accepted suggestion batch item. */
export const SuggestionAcceptedBody = v.object({
  feedback_record_id: v.string(),
  feedback_suggestion_id: v.pipe(v.string(), v.description('The same for the same (record, question, agent): a later call replaces that suggestion.')),
});
export type SuggestionAcceptedBody = v.InferOutput<typeof SuggestionAcceptedBody>;

/** What a write call is told once its write is queued. */
export type WriteAnswer = AcceptedBody | SuggestionAcceptedBody;

/** What a batch item can be refused with: the refusals of the checks a single write passes before it is queued. */
export const BATCH_ITEM_CODES = ['validation_failed', 'forbidden', 'record_not_found', 'dataset_not_found', 'payload_too_large'] as const satisfies readonly ErrorCode[];
export type BatchItemCode = (typeof BATCH_ITEM_CODES)[number];

/** The statuses of those refusals, as the single calls answer them (for the description). */
const ITEM_STATUSES = [...new Set(BATCH_ITEM_CODES.map((code) => ErrorCode[code].status))].sort((a, b) => a - b);
const ITEM_STATUS_TEXT = `${ITEM_STATUSES.slice(0, -1).join(', ')} or ${ITEM_STATUSES.at(-1)}`;

const ItemIndex = v.pipe(v.number(), v.integer(), v.minValue(0), v.description('The index of the item in the request.'));

/** One batch item's outcome, at its place in the answer: `status` is what a single call would have answered. */
const BatchItemResult = v.union([
  v.object({ index: ItemIndex, status: v.literal(200), result: v.union([AcceptedBody, SuggestionAcceptedBody]) }),
  v.object({
    index: ItemIndex,
    status: v.pipe(v.number(), v.integer(), v.description(`The HTTP status a single call would have had: ${ITEM_STATUS_TEXT}.`)),
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

/** A response as the read endpoints show it: the wire names, no internal bookkeeping (`seq`, `api_key`, `request_id`). */
export const ResponseView = v.object({
  feedback_response_id: v.string(),
  user_id: v.string(),
  status: v.string(),
  values: v.record(v.string(), v.unknown()),
  created_at: v.pipe(v.string(), v.description("ISO 8601; acceptance time of the pair's first response.")),
  updated_at: v.pipe(v.string(), v.description('ISO 8601; acceptance time of the version shown.')),
});
export type ResponseView = v.InferOutput<typeof ResponseView>;

/** A record's current suggestion for one (question, agent), as the read endpoints show it. */
export const SuggestionView = v.object({
  feedback_suggestion_id: v.string(),
  question: v.string(),
  agent: v.string(),
  value: v.unknown(),
  score: v.exactOptional(v.number()),
  created_at: v.pipe(v.string(), v.description('ISO 8601; acceptance time of the first suggestion of this (question, agent).')),
  updated_at: v.pipe(v.string(), v.description('ISO 8601; acceptance time of the suggestion shown.')),
});
export type SuggestionView = v.InferOutput<typeof SuggestionView>;

/** A record as the read endpoints show it, with its responses unless the listing left them out. */
export const RecordView = v.object({
  feedback_record_id: v.string(),
  feedback_dataset_id: v.string(),
  field_to_value: v.record(v.string(), v.unknown()),
  external_id: v.exactOptional(v.string()),
  metadata: v.exactOptional(v.record(v.string(), v.unknown())),
  status: v.pipe(v.string(), v.description('`submitted`; in a dataset with a completion rule `pending` or `completed`, kept by the worker as responses are stored (docs/annotation.md).')),
  created_at: v.pipe(v.string(), v.description("ISO 8601; the API's acceptance time. With `_id`, the listing's order.")),
  updated_at: v.pipe(v.string(), v.description('ISO 8601; equal to `created_at` (a record does not change, but for its completion `status`; its responses do).')),
  responses: v.exactOptional(v.pipe(v.array(ResponseView), v.description('Oldest first. Absent with `responses=false`.'))),
  suggestions: v.exactOptional(v.pipe(v.array(SuggestionView), v.description('Model suggestions, one per (question, agent), by question then agent. On GET /feedback-record/{id} and the export; absent when the record has none.'))),
});
export type RecordView = v.InferOutput<typeof RecordView>;

/** One page of `GET /datasets/{dataset_id}/records`. */
export const RecordPage = v.object({
  items: v.array(RecordView),
  next_cursor: v.pipe(v.nullable(v.string()), v.description('Pass as `cursor` for the next page; null once the listing reached the end.')),
});
export type RecordPage = v.InferOutput<typeof RecordPage>;

const Count = (description: string) => v.pipe(v.number(), v.integer(), v.minValue(0), v.description(description));
const Alpha = v.pipe(
  v.nullable(v.number()),
  v.description("Krippendorff's alpha: 1 perfect agreement, 0 what chance would give, below 0 systematic disagreement; null when undefined (fewer than two pairable values, or all of them the same)."),
);

/** The 200 body of `GET /datasets/{dataset_id}/agreement`. */
export const AgreementBody = v.object({
  question: v.string(),
  level: v.pipe(v.picklist(AGREEMENT_LEVELS), v.description('The level of measurement the alpha was computed at: the one asked for, or the default of the question type.')),
  alpha: Alpha,
  units: Count('Pairable units: records with values from at least two annotators.'),
  annotators: Count('Distinct annotators with a value in a pairable unit.'),
  agents: v.exactOptional(Count('With `include_agents`: distinct agents (suggestions) with a value in a pairable unit; they are observers beside the annotators.')),
  pairable_values: Count('n: the values in pairable units (one per annotator and record).'),
  excluded_values: Count("Stored values left out as missing because they do not fit the question's scale now (not one of its options or values, a wrong type), e.g. written before its definition changed."),
  options: v.exactOptional(
    v.pipe(
      v.array(v.object({ option: v.string(), alpha: Alpha, chosen: Count('Pairable values that include this option.') })),
      v.description('multi_label only: the binary nominal alpha of each option (chosen or not); the top-level alpha pools every (record, option) pair as one unit.'),
    ),
  ),
});
export type AgreementBody = v.InferOutput<typeof AgreementBody>;

/** One version of a response in `GET /feedback-record/{id}/history`. */
export const ResponseVersionView = v.object({
  status: v.string(),
  values: v.record(v.string(), v.unknown()),
  updated_at: v.pipe(v.string(), v.description('ISO 8601; acceptance time of this version.')),
  seq: v.pipe(v.number(), v.integer(), v.description('Acceptance order of this version: a higher one was accepted later (the order the service applies versions in).')),
});
export type ResponseVersionView = v.InferOutput<typeof ResponseVersionView>;

/** The 200 body of `GET /feedback-record/{id}/history`. */
export const RecordHistoryBody = v.object({
  feedback_record_id: v.string(),
  feedback_dataset_id: v.string(),
  responses: v.pipe(
    v.array(
      v.object({
        feedback_response_id: v.string(),
        user_id: v.string(),
        versions: v.pipe(
          v.array(ResponseVersionView),
          v.description('Oldest first; the last is the current version. Earlier versions are kept up to RESPONSE_HISTORY_MAX (the oldest dropped first); a stale write (older than the stored version) leaves none.'),
        ),
      }),
    ),
    v.description("The record's responses, oldest first."),
  ),
});
export type RecordHistoryBody = v.InferOutput<typeof RecordHistoryBody>;

const StatusCounts = v.object({
  submitted: Count('Responses with status submitted.'),
  draft: Count('Responses with status draft.'),
  discarded: Count('Responses with status discarded.'),
});

/** The 200 body of `GET /datasets/{dataset_id}/progress`. */
export const ProgressBody = v.object({
  feedback_dataset_id: v.string(),
  completion: v.pipe(
    v.nullable(CompletionRule),
    v.description("The dataset definition's completion rule; null without one (records then stay `submitted`)."),
  ),
  records: v.object({
    total: Count('Stored records of the dataset.'),
    pending: Count('Records with status pending: fewer distinct annotators submitted than the rule asks.'),
    completed: Count('Records with status completed.'),
  }),
  responses: StatusCounts,
  annotators: v.pipe(
    v.array(v.object({ user_id: v.string(), ...StatusCounts.entries })),
    v.description('Per annotator (`user_id`), their responses by status; ordered by user_id.'),
  ),
  as_of: v.pipe(
    v.string(),
    v.description('When these counts were taken (ISO 8601). Now on small datasets; on large ones (a count taking a second or more) counts are kept for ten times as long as they took, at most 60 s, so a call may get counts up to three times that old while a new count runs. See docs/annotation.md#progress-at-scale.'),
  ),
});
export type ProgressBody = v.InferOutput<typeof ProgressBody>;
