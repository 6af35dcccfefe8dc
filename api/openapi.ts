import * as v from 'valibot';
import { AcceptedBody, AgreementBody, BatchBody, ProgressBody, RecordHistoryBody, RecordPage, RecordView, SuggestionAcceptedBody } from '../shared/answers.js';
import { DatasetListQuery, DatasetPage } from '../shared/dataset-admin.js';
import { DatasetDefinition, DatasetDefinitionInput } from '../shared/dataset-definition.js';
import { DeadLetterDetail, DeadLetterListQuery, DeadLetterPage, DeadLetterRequeued, DeadLetterSummary } from '../shared/dead-letter-admin.js';
import type { ErrorCode } from '../shared/errors.js';
import { BatchResponseToNewRecord, DatasetId, FeedbackRecordBody, feedbackBatchBody, FeedbackResponseBody, FeedbackSuggestionBody, FeedbackTokenBody } from '../shared/schemas.js';
import { IDEMPOTENCY_KEY_RE } from './idempotency.js';
import { buildOpenApiDocument, type OpenApiDocument, type OperationSpec, type Paths } from './openapi-build.js';
import { AgreementQuery, DatasetIdParam, EXPORT_QUERY_DOC, RECORD_LIST_QUERY_DOC } from './read-query.js';
import { FILTER_SCAN_MAX_RECORDS, UPDATED_SINCE_MAX_RECORDS } from './reads.js';
import { DatasetSchemas, DeadLetterPurged, FeedbackTokenAnswer, HealthBody, ReadinessBody } from './answers.js';
import { BATCH_STATUS, FEEDBACK_BATCH_PATH } from './write-pipeline.js';
import { ErasureAccepted, ErasureView } from '../shared/erasures.js';
import { ERASURES_PATH } from './routes/erasures.js';
import { WRITE_KINDS, type WriteKind } from './write-kinds.js';
import { WEBHOOK_PATHS, WEBHOOK_SCHEMAS } from './openapi-webhooks.js';

/*
 * The OpenAPI document of the API: what cannot be derived (summaries, descriptions, which codes
 * an operation adds), one entry per operation. Schemas are the valibot schemas the routes parse
 * with or build their answers from; error responses come from the codes table (shared/errors.ts);
 * see api/openapi-build.ts.
 */

/**
 * Version of the HTTP contract described (OpenAPI `info.version`), not of the package: bumped
 * when a client would have to change.
 */
const API_CONTRACT_VERSION = '1.0.0';

/** Codes of the write endpoints after authentication, in the order of the steps that raise them. */
const WRITE_CODES = [
  'rate_limited',
  'unsupported_media_type',
  'payload_too_large',
  'invalid_json',
  'validation_failed',
  'invalid_header',
  'overloaded',
  'idempotency_key_reused',
  'idempotency_key_in_use',
  'queue_unavailable',
] as const satisfies readonly ErrorCode[];

const JSON_BODY = 'JSON (`application/json`, `application/*+json`, UTF-8; a missing `Content-Type` is read as JSON).';
/** Sent on every write answered after authentication while a rate limit applies to the key. */
const RATE_LIMIT_HEADERS = ['RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset'] as const;

/** A write endpoint: a JSON body in, the accepted ids out (or `answer`, for the batch). */
function write(spec: {
  operationId: string;
  summary: string;
  description: string;
  body: v.GenericSchema;
  codes?: readonly ErrorCode[];
  feedbackToken?: true;
  answer?: { status: number; description: string; json: v.GenericSchema };
  /** `admin`: an admin key only (the erasures). */
  access?: 'key' | 'admin';
}): OperationSpec {
  const { body, codes, answer, access, ...rest } = spec;
  const success = answer ?? { status: 200, description: 'The write is in Redis, acknowledged, and will reach MongoDB.', json: AcceptedBody };
  return {
    ...rest,
    access: access ?? 'key',
    headers: ['Idempotency-Key'],
    body: { schema: body, description: JSON_BODY },
    answers: { [success.status]: { description: success.description, json: success.json, headers: ['Idempotent-Replayed', ...RATE_LIMIT_HEADERS] } },
    codes: [...WRITE_CODES, ...(codes ?? [])],
  };
}

/** The operation of a write kind's own endpoint, from its declaration (api/write-kinds.ts). */
function writeKindOperation(kind: WriteKind<unknown, unknown>): OperationSpec {
  return write({ ...kind.openapi, body: kind.schema, ...(kind.feedbackToken ? { feedbackToken: true as const } : {}) });
}

const DATASET_ID = { id: { description: 'The dataset id (`feedback_dataset_id`).', schema: DatasetId } };

const READ_DATASET_ID = { dataset_id: { description: 'A `feedback_dataset_id` (1-256 characters).', schema: DatasetIdParam } };

const ERASURE_ID = { id: 'The `erasure_id` of the 202 of `POST /admin/erasures`.' };

const DEAD_LETTER_ID = { id: 'The dead letter\'s id (`<queue>:w:<seq>:<response id>`, or `<queue>:job:…` for whole jobs and writes of earlier releases).' };

/** The operations; `batchBody` is the batch envelope as documented (its limit is a setting). */
const paths = (batchRequestMaxItems: number, batchBody: v.GenericSchema): Paths => ({
  ...Object.fromEntries(WRITE_KINDS.map((kind: WriteKind<unknown, unknown>) => [kind.path, { post: writeKindOperation(kind) }])),
  [FEEDBACK_BATCH_PATH]: {
    post: write({
      operationId: 'postFeedbackBatch',
      summary: 'Several writes in one call (backfills, fleets that buffer)',
      description:
        `Up to ${batchRequestMaxItems} items (\`BATCH_REQUEST_MAX_ITEMS\`; more is 400 \`validation_failed\`), each the body of POST /feedback-record, ` +
        'the body of POST /feedback-response, the body of POST /feedback-suggestion, or a response to a record of an earlier item of the same call (`record_index`). Items are checked one by one: ' +
        'a bad item does not block the good ones. 207 once every accepted item is queued (in Redis, acknowledged); each item has its own status, in order. ' +
        'If any accepted item could not be queued the whole call is 503 and nothing is promised: retry the whole call with the same `Idempotency-Key`. ' +
        'The body limit is `BATCH_REQUEST_MAX_BYTES` instead of `BODY_LIMIT_BYTES`. A call counts as one request for the rate limit.',
      body: batchBody,
      answer: {
        status: BATCH_STATUS,
        description: 'Multi-Status: every accepted item is in Redis, acknowledged, and will reach MongoDB; refused items carry their error.',
        json: BatchBody,
      },
    }),
  },
  '/feedback-tokens': {
    post: {
      operationId: 'postFeedbackToken',
      summary: 'Mint a short-lived browser feedback token for one record and one annotator',
      description:
        "Server side, with an API key that may write the record's dataset. The token lets a browser page answer that record as `user_id` (and, with `questions`, only those `values` keys) on POST /feedback-response until `expires_at`. " +
        'Lifetime: `expires_in_seconds`, default `FEEDBACK_TOKEN_TTL_SECONDS`, at most `FEEDBACK_TOKEN_MAX_TTL_SECONDS`.',
      access: 'key',
      body: { schema: FeedbackTokenBody, description: JSON_BODY },
      answers: { 200: { description: 'The token; `Cache-Control: no-store`.', json: FeedbackTokenAnswer, headers: RATE_LIMIT_HEADERS } },
      codes: ['rate_limited', 'unsupported_media_type', 'payload_too_large', 'invalid_json', 'validation_failed', 'record_not_found'],
    },
  },
  '/feedback-record/{id}': {
    get: {
      operationId: 'getFeedbackRecord',
      summary: 'One stored record with all its responses',
      description: 'Read scope (or admin). An id whose signature verifies but that is not stored yet is 404 `record_pending` (retry after `Retry-After`); any other unknown id is 404 `record_not_found`.',
      access: 'read',
      path: { id: 'A `feedback_record_id` returned by a POST.' },
      codes: ['validation_failed', 'record_not_found', 'record_pending'],
      answers: { 200: { description: 'The record.', json: RecordView } },
    },
  },
  '/feedback-record/{id}/history': {
    get: {
      operationId: 'getRecordHistory',
      summary: "Each response of a record with its versions, oldest first",
      description:
        'Read scope (or admin), as GET /feedback-record/{id}. Per response: its earlier versions (kept in the same store write as the version that replaced them, at most `RESPONSE_HISTORY_MAX`, the oldest dropped first) and then the current one, each with `status`, `values`, `updated_at` and `seq`, the acceptance order. ' +
        'A write older than the stored version (stale) leaves no version.',
      access: 'read',
      path: { id: 'A `feedback_record_id` returned by a POST.' },
      codes: ['validation_failed', 'record_not_found', 'record_pending'],
      answers: { 200: { description: 'The versions.', json: RecordHistoryBody } },
    },
  },
  '/datasets/{dataset_id}/progress': {
    get: {
      operationId: 'getDatasetProgress',
      summary: 'How far along the dataset is: records by completion status, responses by status, per annotator',
      description:
        'Read scope for the dataset (or admin). `records.pending`/`completed` follow the definition\'s `completion` rule (the worker keeps each record\'s `status`); ' +
        'a dataset that never had a rule has none of either; after a rule is removed, records keep the status they had (`completion` is then null). Counted on each call from indexes: see docs/annotation.md for the cost on a large dataset.',
      access: 'read',
      path: READ_DATASET_ID,
      codes: ['validation_failed'],
      answers: { 200: { description: 'The counts.', json: ProgressBody } },
    },
  },
  '/datasets/{dataset_id}/records': {
    get: {
      operationId: 'listDatasetRecords',
      summary: "A page of a dataset's records, ordered by (created_at, _id)",
      description:
        'Read scope for the dataset (or admin). Follow `next_cursor` until it is null: a record stored before paging began is returned exactly once, whatever is written meanwhile. ' +
        `\`updated_since\`: records whose own \`updated_at\` or one of whose responses' \`updated_at\` is at or after it; at most ${UPDATED_SINCE_MAX_RECORDS} records touched by responses since then (else 400 \`validation_failed\`). ` +
        `Filters (\`status\`, \`user_id\`, \`response_status\`, \`metadata.<key>\`) are ANDed and must be repeated with every cursor. With \`user_id\` or \`response_status\` a page looks at most ${FILTER_SCAN_MAX_RECORDS} records: it may then hold fewer than \`limit\` items, even none, with a \`next_cursor\` to go on.`,
      access: 'read',
      path: READ_DATASET_ID,
      query: RECORD_LIST_QUERY_DOC,
      codes: ['validation_failed'],
      answers: { 200: { description: 'One page.', json: RecordPage } },
    },
  },
  '/datasets/{dataset_id}/export': {
    get: {
      operationId: 'exportDataset',
      summary: 'The whole dataset as NDJSON, one record with its responses per line',
      description: 'Read scope for the dataset (or admin). Streamed as the client reads; no guaranteed order; every record stored before the export began appears once. A failure after the first line cuts the connection. Takes the filters of `/records`.',
      access: 'read',
      path: READ_DATASET_ID,
      query: EXPORT_QUERY_DOC,
      codes: ['validation_failed'],
      answers: { 200: { description: 'NDJSON: each line a `RecordView` with its responses.', media: 'application/x-ndjson' } },
    },
  },
  '/datasets/{dataset_id}/agreement': {
    get: {
      operationId: 'getAgreement',
      summary: "Krippendorff's alpha of one question over the dataset's submitted responses",
      description:
        'Read scope for the dataset (or admin). Units are records, observers annotators (`user_id`), the value `values[question]` of each `submitted` response; ' +
        'a record with fewer than two values is not pairable. The level defaults by question type (label nominal, rating ordinal by the order of its `values`, number interval); ' +
        'multi_label is binary nominal per option (`options`) with a pooled top-level alpha; ranking, text and json are 400. ' +
        'A dataset without a definition: the values decide (every value a number: interval, else nominal; lists or objects: 400). ' +
        'Computed on each call from one cursor over the responses sorted by record: memory grows with the distinct values and annotators, not with the records.',
      access: 'read',
      path: READ_DATASET_ID,
      query: AgreementQuery,
      codes: ['validation_failed', 'question_not_found'],
      answers: { 200: { description: 'The alpha and what it was computed over.', json: AgreementBody } },
    },
  },
  '/healthz': {
    get: { operationId: 'getHealthz', summary: 'The process is up', access: 'public', answers: { 200: { description: 'Up.', json: HealthBody } } },
  },
  '/readyz': {
    get: {
      operationId: 'getReadyz',
      summary: 'Redis answers and the backlog is under the ceiling',
      access: 'public',
      answers: {
        200: { description: 'Ready.', json: ReadinessBody },
        503: { description: 'Not ready: Redis does not answer, or the backlog is above `BACKLOG_MAX_JOBS`.', json: ReadinessBody },
      },
    },
  },
  '/metrics': {
    get: { operationId: 'getMetrics', summary: 'Prometheus metrics of this API process', access: 'public', answers: { 200: { description: 'Prometheus text exposition format.', media: 'text/plain' } } },
  },
  [`${ERASURES_PATH}/{id}`]: {
    get: {
      operationId: 'getErasure',
      summary: 'The state of an erasure: pending or done, what it removed',
      description: '`pending` while the erasure is queued or running; `done` once every write of the user accepted before its 202 is removed (docs/erasure.md).',
      access: 'admin',
      path: ERASURE_ID,
      codes: ['not_found', 'store_unavailable'],
      answers: { 200: { description: 'The erasure.', json: ErasureView } },
    },
  },
  '/admin/dead-letters': {
    get: { operationId: 'listDeadLetters', summary: 'List dead-lettered writes, newest first', access: 'admin', query: DeadLetterListQuery, codes: ['validation_failed'], answers: { 200: { description: 'One page.', json: DeadLetterPage } } },
  },
  '/admin/dead-letters/{id}': {
    get: { operationId: 'getDeadLetter', summary: 'One dead letter with its payload', access: 'admin', path: DEAD_LETTER_ID, codes: ['not_found'], answers: { 200: { description: 'The dead letter.', json: DeadLetterDetail } } },
    delete: { operationId: 'purgeDeadLetter', summary: 'Delete one dead letter', access: 'admin', path: DEAD_LETTER_ID, codes: ['not_found'], answers: { 200: { description: 'Deleted.', json: DeadLetterPurged } } },
  },
  '/admin/dead-letters/{id}/retry': {
    post: {
      operationId: 'retryDeadLetter',
      summary: 'Queue the write again through the normal path (idempotent), keeping its acceptance order',
      access: 'admin',
      path: DEAD_LETTER_ID,
      codes: ['not_found', 'dead_letter_not_retryable', 'queue_unavailable'],
      answers: { 200: { description: 'Queued again; the dead letter is deleted.', json: DeadLetterRequeued } },
    },
  },
  ...WEBHOOK_PATHS,
  '/datasets': {
    get: { operationId: 'listDatasets', summary: 'List dataset definitions, by id', access: 'admin', query: DatasetListQuery, codes: ['validation_failed'], answers: { 200: { description: 'One page.', json: DatasetPage } } },
  },
  '/datasets/{id}': {
    put: {
      operationId: 'putDataset',
      summary: 'Create or replace a dataset definition (idempotent)',
      description: 'Applies to writes accepted after the change (within `DATASETS_REFRESH_MS` in other API processes); stored data is not rewritten.',
      access: 'admin',
      path: DATASET_ID,
      body: { schema: DatasetDefinitionInput, description: JSON_BODY },
      codes: ['invalid_json', 'validation_failed', 'unsupported_media_type', 'payload_too_large'],
      answers: { 200: { description: 'Replaced, or unchanged.', json: DatasetDefinition }, 201: { description: 'Created.', json: DatasetDefinition } },
    },
    get: { operationId: 'getDataset', summary: 'One dataset definition', access: 'admin', path: DATASET_ID, codes: ['dataset_not_found'], answers: { 200: { description: 'The definition.', json: DatasetDefinition } } },
  },
  '/datasets/{id}/schema': {
    get: {
      operationId: 'getDatasetSchema',
      summary: 'JSON Schemas of valid write bodies for this dataset',
      description: 'Any key that may write to the dataset (no admin scope needed).',
      access: 'key',
      tags: ['datasets'],
      path: DATASET_ID,
      codes: ['dataset_not_found'],
      answers: { 200: { description: 'JSON Schema 2020-12 of a `POST /feedback-record` body and of a `POST /feedback-response` body.', json: DatasetSchemas } },
    },
  },
  '/admin/queues': {
    get: {
      operationId: 'getQueueDashboard',
      summary: 'The bull-board queue dashboard (HTML; its assets and JSON API live below this path)',
      description: 'Browsers may log in with HTTP Basic: any user name, an admin key as password.',
      access: 'admin',
      basicAuth: true,
      answers: { 200: { description: 'The dashboard page.', media: 'text/html' } },
    },
  },
  '/openapi.json': {
    get: { operationId: 'getOpenApi', summary: 'This document', access: 'public', answers: { 200: { description: 'OpenAPI 3.1.', json: v.record(v.string(), v.unknown()) } } },
  },
});

/**
 * The OpenAPI 3.1 document of the API. What JSON Schema cannot express of the request schemas is
 * said in descriptions (api/openapi-build.ts). Pure: build it once, serve it many times.
 */
export function createOpenApiDocument(options: { batchRequestMaxItems: number }): OpenApiDocument {
  // The route checks the items one by one; the document says what each may be.
  const FeedbackBatchBody = feedbackBatchBody(options.batchRequestMaxItems, v.union([FeedbackRecordBody, FeedbackResponseBody, BatchResponseToNewRecord, FeedbackSuggestionBody]));
  return buildOpenApiDocument({
    info: {
      title: 'feedback-ingest',
      version: API_CONTRACT_VERSION,
      description:
        'Collects human feedback on LLM and chatbot output. A 200 means the write is in Redis, acknowledged, and will reach MongoDB. ' +
        'Every response carries `X-Request-Id`. Every error has the shape `{"error": {code, message, details?}}`. ' +
        'Any unknown path answers 404 `not_found` (components.responses.NotFound) and a known path with a wrong method ' +
        '405 `method_not_allowed` with `Allow` (components.responses.MethodNotAllowed).',
    },
    paths: paths(options.batchRequestMaxItems, FeedbackBatchBody),
    schemas: {
      FeedbackRecordBody,
      FeedbackResponseBody,
      FeedbackBatchBody,
      BatchResponseToNewRecord,
      FeedbackSuggestionBody,
      AcceptedResponse: AcceptedBody,
      SuggestionAcceptedResponse: SuggestionAcceptedBody,
      BatchResponse: BatchBody,
      FeedbackTokenBody,
      FeedbackTokenResponse: FeedbackTokenAnswer,
      ReadinessResponse: ReadinessBody,
      DeadLetterSummary,
      DatasetDefinitionInput,
      DatasetDefinition,
      RecordView,
      AgreementResponse: AgreementBody,
      RecordHistoryResponse: RecordHistoryBody,
      ProgressResponse: ProgressBody,
      ErasureAccepted,
      ErasureView,
      ...WEBHOOK_SCHEMAS,
    },
    components: {
      securitySchemes: {
        bearerAuth: { type: 'http', scheme: 'bearer', description: 'An API key: `Authorization: Bearer <key>`.' },
        basicAuth: { type: 'http', scheme: 'basic', description: 'The dashboard only: any user name, an admin API key as password.' },
        feedbackToken: {
          type: 'http',
          scheme: 'bearer',
          bearerFormat: 'JWT',
          description: 'A feedback token from POST /feedback-tokens: `Authorization: Bearer <token>`, on POST /feedback-response only.',
        },
      },
      parameters: {
        'Idempotency-Key': {
          name: 'Idempotency-Key',
          in: 'header',
          required: false,
          description:
            '1 to 255 printable characters (else 400 `invalid_header`). A repeat by the same API key within `IDEMPOTENCY_TTL_SECONDS` returns the first 200 body and stores nothing new; with another body, 409 `idempotency_key_reused`.',
          schema: { type: 'string', pattern: IDEMPOTENCY_KEY_RE.source },
        },
        'X-Request-Id': {
          name: 'X-Request-Id',
          in: 'header',
          required: false,
          description: 'Echoed when 1 to 200 printable characters, else replaced by a new id; logged by the API and the worker job.',
          schema: { type: 'string' },
        },
      },
      headers: {
        'X-Request-Id': { description: 'The request id (the caller\'s, if sane, else minted).', required: true, schema: { type: 'string' } },
        'Idempotent-Replayed': { description: '`true` when the body is the replay of an earlier call with the same `Idempotency-Key`.', schema: { type: 'string', enum: ['true'] } },
        'Retry-After': { description: 'Seconds to wait before retrying.', schema: { type: 'integer', minimum: 0 } },
        'WWW-Authenticate': { description: '`Bearer` (no or malformed header) or `Bearer error="invalid_token"` (unknown key).', required: true, schema: { type: 'string' } },
        Allow: { description: 'The methods the path accepts.', required: true, schema: { type: 'string' } },
        'RateLimit-Limit': { description: 'Write requests per minute allowed to this API key (only when a rate limit applies to it).', schema: { type: 'integer', minimum: 0 } },
        'RateLimit-Remaining': { description: 'Requests left in the current window.', schema: { type: 'integer', minimum: 0 } },
        'RateLimit-Reset': { description: 'Seconds until the window resets.', schema: { type: 'integer', minimum: 0 } },
      },
    },
  });
}
