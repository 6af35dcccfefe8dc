import { toJsonSchema, type ConversionConfig, type JsonSchema } from '@valibot/to-json-schema';
import { STATUS_CODES } from 'node:http';
import * as v from 'valibot';
import { ErrorCode, type ErrorDetail, type ErrorHeader } from '../shared/errors.js';
import { BatchResponseToNewRecord, FeedbackRecordBody, feedbackBatchBody, FeedbackResponseBody, FeedbackTokenBody, hasAnyKey, isPlainObject, ResponseStatus } from '../shared/schemas.js';
import type { FeedbackTokenAnswer } from './routes/feedback-tokens.js';
import { IDEMPOTENCY_KEY_RE } from './idempotency.js';
import type { AcceptedBody } from './routes/feedback.js';
import { BATCH_STATUS, type BatchBody } from './routes/batch.js';
import { DeadLetterReason } from '../shared/dead-letters.js';
import { DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT, type DeadLetterSummary } from '../shared/dead-letter-admin.js';
import { DatasetDefinitionInput } from '../shared/dataset-definition.js';
import { DATASET_LIST_MAX } from '../shared/dataset-admin.js';
import { DEFAULT_PAGE_LIMIT, MAX_PAGE_LIMIT, RECORD_ORDERS } from './read-query.js';
import { UPDATED_SINCE_MAX_RECORDS, type RecordView, type ResponseView } from './reads.js';

/** An OpenAPI 3.1 document, as plain JSON. */
export type OpenApiDocument = Record<string, unknown>;

/**
 * Version of the HTTP contract described (OpenAPI `info.version`), not of the package: bumped
 * when a client would have to change.
 */
const API_CONTRACT_VERSION = '1.0.0';

function noteOf(message: unknown): string | undefined {
  return typeof message === 'string' ? message : undefined;
}

function withNote(schema: JsonSchema, note: string | undefined): JsonSchema {
  if (note === undefined) return schema;
  const also = `Also checked by the API: ${note}.`;
  return { ...schema, description: schema.description === undefined ? also : `${schema.description} ${also}` };
}

/**
 * How the valibot schemas of shared/schemas.ts become JSON Schema 2020-12 (the dialect of
 * OpenAPI 3.1). Anything the converter does not know and that is not handled below throws
 * (errorMode 'throw'), so a new construct in the schemas fails the OpenAPI test instead of
 * silently documenting less than the API checks.
 *
 * `typeMode: 'output'` starts each pipe at its last schema: closedObject() is
 * `pipe(custom(isPlainObject), rawCheck, objectWithRest(entries, never), transform)`, and the
 * object schema is the part JSON Schema can express.
 */
const CONVERSION: ConversionConfig = {
  target: 'draft-2020-12',
  typeMode: 'output',
  errorMode: 'throw',
  overrideSchema({ valibotSchema, jsonSchema }) {
    // jsonObject(): a plain-object check; its key and depth rules travel in its description.
    if (valibotSchema.type === 'custom' && (valibotSchema as { check?: unknown }).check === isPlainObject) {
      return { ...jsonSchema, type: 'object' };
    }
    // closedObject(): `additionalProperties: false` says what `{not: {}}` says, more readably.
    if (valibotSchema.type === 'object_with_rest' && (valibotSchema as { rest?: { type?: unknown } }).rest?.type === 'never') {
      return { ...jsonSchema, additionalProperties: false };
    }
    return undefined;
  },
  overrideAction({ valibotAction, jsonSchema }) {
    const action = valibotAction as { type: string; requirement?: unknown; message?: unknown };
    switch (action.type) {
      case 'check':
        if (action.requirement === hasAnyKey) return { ...jsonSchema, minProperties: 1 };
        // e.g. "must not contain unpaired surrogates": not expressible, so stated in words.
        return withNote(jsonSchema, noteOf(action.message));
      case 'partial_check':
        // "values must have at least one key unless status is discarded".
        return withNote(jsonSchema, noteOf(action.message));
      case 'raw_check':
        // jsonObject()'s key/depth walk (described by its v.description) and closedObject()'s
        // report of __proto__-like keys (already excluded by additionalProperties: false).
        return jsonSchema;
      case 'transform':
        // closedObject()'s only transform is a type-level cast; the value is unchanged.
        return jsonSchema;
      default:
        return undefined;
    }
  },
};

function jsonSchemaOf(schema: v.GenericSchema): JsonSchema {
  // `$schema` is implied by OpenAPI 3.1's dialect; repeated inside components it is noise.
  const converted = toJsonSchema(schema, CONVERSION);
  delete converted.$schema;
  return converted;
}

/** The 200 body of both write endpoints (documentation only: the API builds it itself). */
const AcceptedResponse = v.object({
  feedback_record_id: v.pipe(v.string(), v.description('Minted by the API before queueing; usable at once with POST /feedback-response.')),
  feedback_response_id: v.pipe(v.string(), v.description('The same for the same (record, annotator): a later call updates that response.')),
  status: ResponseStatus,
});
// The documented 200 body and the one the routes build must not drift apart.
const acceptedMatches: [v.InferOutput<typeof AcceptedResponse>, AcceptedBody] extends [AcceptedBody, v.InferOutput<typeof AcceptedResponse>] ? true : never = true;
void acceptedMatches;

/** The 207 body of `POST /feedback-batch` (documentation only: the route builds it). */
const BatchResponse = v.object({
  accepted: v.pipe(v.number(), v.integer(), v.minValue(0), v.description('Items queued by this call (in Redis, acknowledged).')),
  rejected: v.pipe(v.number(), v.integer(), v.minValue(0), v.description('Items refused, each with its error.')),
  items: v.pipe(
    v.array(v.union([
      v.object({ index: v.pipe(v.number(), v.integer(), v.minValue(0)), status: v.literal(200), result: AcceptedResponse }),
      v.object({
        index: v.pipe(v.number(), v.integer(), v.minValue(0)),
        status: v.pipe(v.number(), v.integer(), v.description('The HTTP status a single call would have had: 400, 403 or 404.')),
        error: v.object({ code: v.picklist(['validation_failed', 'forbidden', 'record_not_found']), message: v.string(), details: v.exactOptional(v.array(v.object({ path: v.string(), message: v.string() }))) }),
      }),
    ])),
    v.description('One result per item, in the order of the items.'),
  ),
});
// The documented batch answer and the one the route builds must not drift apart (item by item).
const batchMatches: v.InferOutput<typeof BatchResponse> extends BatchBody ? true : never = true;
void batchMatches;

const ReadinessResponse = v.object({
  status: v.picklist(['ready', 'not_ready']),
  redis: v.picklist(['up', 'down']),
  backlog_jobs: v.nullable(v.number()),
  overloaded: v.boolean(),
});

const HealthResponse = v.object({ status: v.literal('ok') });

const ERROR_CODES = Object.keys(ErrorCode) as ErrorCode[];

/** The error shape of the contract, with `code` limited to `codes`. */
function errorBody(codes: readonly ErrorCode[]) {
  const detail = v.object({ path: v.string(), message: v.string() });
  // The documented detail and the one the API renders must not drift apart.
  const detailMatches: v.InferOutput<typeof detail> extends ErrorDetail ? true : never = true;
  void detailMatches;
  return v.object({
    error: v.object({
      code: v.picklist(codes),
      message: v.pipe(v.string(), v.description('For humans; may change. Match on `code`.')),
      details: v.exactOptional(v.pipe(v.array(detail), v.description('With `validation_failed` only: every problem, with its JSON path.'))),
    }),
  });
}

/** Codes any request can get, whatever its path: Node's parser refusals and bugs. */
const TRANSPORT_CODES = ['bad_request', 'request_timeout', 'headers_too_large', 'internal_error'] as const satisfies readonly ErrorCode[];
/** Codes of both write endpoints, in the order of the middleware that can raise them. */
const WRITE_CODES = [
  ...TRANSPORT_CODES,
  'unauthorized',
  'invalid_api_key',
  'forbidden',
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
/** Codes of the admin endpoints (admin scope). */
const ADMIN_CODES = [...TRANSPORT_CODES, 'unauthorized', 'invalid_api_key', 'forbidden'] as const satisfies readonly ErrorCode[];
/** Codes of no operation in particular: any unknown path, any known path with the wrong method. */
const ANY_PATH_CODES = ['not_found', 'method_not_allowed'] as const satisfies readonly ErrorCode[];

const ref = (name: string) => ({ $ref: `#/components/headers/${name}` });
const X_REQUEST_ID_HEADERS = { 'X-Request-Id': ref('X-Request-Id') };
/** Sent on every write answered after authentication while a rate limit applies to the key. */
const RATE_LIMIT_HEADERS = { 'RateLimit-Limit': ref('RateLimit-Limit'), 'RateLimit-Remaining': ref('RateLimit-Remaining'), 'RateLimit-Reset': ref('RateLimit-Reset') };

/** X-Request-Id and the headers the codes carry (shared/errors.ts). */
function errorHeaders(codes: readonly ErrorCode[]): Record<string, unknown> {
  const headers: Record<string, unknown> = { ...X_REQUEST_ID_HEADERS };
  for (const code of codes) for (const name of (ErrorCode[code] as { headers?: readonly ErrorHeader[] }).headers ?? []) headers[name] = ref(name);
  return headers;
}

/** One response object per status, `code` limited to the given codes of that status. */
function errorResponses(codes: readonly ErrorCode[]): Record<string, unknown> {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of codes) {
    const status = ErrorCode[code].status;
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  const out: Record<string, unknown> = {};
  for (const [status, group] of [...byStatus].sort(([a], [b]) => a - b)) {
    out[String(status)] = {
      description: `${STATUS_CODES[status] ?? 'Error'}: ${group.map((code) => `\`${code}\` (${ErrorCode[code].description})`).join('; ')}`,
      headers: errorHeaders(group),
      content: { 'application/json': { schema: jsonSchemaOf(errorBody(group)) } },
    };
  }
  return out;
}

function jsonContent(schema: unknown) {
  return { 'application/json': { schema } };
}

function writeOperation(options: { operationId: string; summary: string; description: string; body: string; codes: readonly ErrorCode[] }) {
  return {
    operationId: options.operationId,
    summary: options.summary,
    description: options.description,
    security: [{ bearerAuth: [] }],
    parameters: [{ $ref: '#/components/parameters/Idempotency-Key' }, { $ref: '#/components/parameters/X-Request-Id' }],
    requestBody: {
      required: true,
      description: 'JSON (`application/json`, `application/*+json`, UTF-8; a missing `Content-Type` is read as JSON).',
      content: jsonContent({ $ref: `#/components/schemas/${options.body}` }),
    },
    responses: {
      '200': {
        description: 'The write is in Redis, acknowledged, and will reach MongoDB.',
        headers: { ...X_REQUEST_ID_HEADERS, 'Idempotent-Replayed': ref('Idempotent-Replayed'), ...RATE_LIMIT_HEADERS },
        content: jsonContent({ $ref: '#/components/schemas/AcceptedResponse' }),
      },
      ...errorResponses(options.codes),
    },
  };
}

function adminOperation(options: { operationId: string; summary: string; description?: string; parameters?: unknown[]; codes?: readonly ErrorCode[]; responses: Record<string, unknown> }) {
  return {
    operationId: options.operationId,
    summary: options.summary,
    ...(options.description === undefined ? {} : { description: options.description }),
    tags: ['admin'],
    security: [{ bearerAuth: [] }],
    parameters: [{ $ref: '#/components/parameters/X-Request-Id' }, ...(options.parameters ?? [])],
    responses: { ...options.responses, ...errorResponses([...ADMIN_CODES, ...(options.codes ?? [])]) },
  };
}

const DEAD_LETTER_ID = { name: 'id', in: 'path', required: true, description: 'The dead letter\'s id (`<queue>:<job id>:<write index>` or `…:job`).', schema: { type: 'string' } };

/** What the dead-letter endpoints answer (shared/dead-letter-admin.ts). */
const DeadLetterSummarySchema = v.object({
  id: v.string(),
  reason: v.picklist(Object.values(DeadLetterReason)),
  error: v.string(),
  queue: v.string(),
  job_id: v.string(),
  write_index: v.nullable(v.pipe(v.number(), v.integer())),
  request_id: v.nullable(v.string()),
  record_id: v.nullable(v.string()),
  seq: v.nullable(v.pipe(v.number(), v.integer(), v.description('Acceptance order of the write, kept by a retry.'))),
  failed_at: v.pipe(v.string(), v.description('ISO 8601 date-time.')),
  payload_bytes: v.pipe(v.number(), v.integer(), v.minValue(0)),
});
// The documented summary and the one the admin builds must not drift apart.
const summaryMatches: [v.InferOutput<typeof DeadLetterSummarySchema>, DeadLetterSummary] extends [DeadLetterSummary, v.InferOutput<typeof DeadLetterSummarySchema>] ? true : never = true;
void summaryMatches;

const DATASET_ID = { name: 'id', in: 'path', required: true, description: 'The dataset id (`feedback_dataset_id`).', schema: { type: 'string', minLength: 1, maxLength: 256 } };
const DATASET = jsonContent({ $ref: '#/components/schemas/DatasetDefinition' });

/** `/datasets…` (api/routes/datasets.ts): definitions under the admin scope; `/schema` for any key that may write to the dataset. */
function datasetPaths(): Record<string, unknown> {
  return {
    '/datasets': {
      get: adminOperation({
        operationId: 'listDatasets',
        summary: 'List dataset definitions, by id',
        parameters: [
          { name: 'limit', in: 'query', required: false, schema: { type: 'integer', minimum: 1, maximum: DATASET_LIST_MAX, default: 100 } },
          { name: 'cursor', in: 'query', required: false, description: 'The `next_cursor` of the previous page.', schema: { type: 'string' } },
        ],
        codes: ['validation_failed'],
        responses: { '200': { description: 'One page.', headers: X_REQUEST_ID_HEADERS, content: jsonContent({ type: 'object', required: ['items', 'next_cursor'], properties: { items: { type: 'array', items: { $ref: '#/components/schemas/DatasetDefinition' } }, next_cursor: { type: ['string', 'null'] } } }) } },
      }),
    },
    '/datasets/{id}': {
      put: {
        ...adminOperation({
          operationId: 'putDataset',
          summary: 'Create or replace a dataset definition (idempotent)',
          description: 'Applies to writes accepted after the change (within `DATASETS_REFRESH_MS` in other API processes); stored data is not rewritten.',
          parameters: [DATASET_ID],
          codes: ['invalid_json', 'validation_failed', 'unsupported_media_type', 'payload_too_large'],
          responses: { '200': { description: 'Replaced, or unchanged.', headers: X_REQUEST_ID_HEADERS, content: DATASET }, '201': { description: 'Created.', headers: X_REQUEST_ID_HEADERS, content: DATASET } },
        }),
        requestBody: { required: true, content: jsonContent({ $ref: '#/components/schemas/DatasetDefinitionInput' }) },
      },
      get: adminOperation({
        operationId: 'getDataset',
        summary: 'One dataset definition',
        parameters: [DATASET_ID],
        codes: ['dataset_not_found'],
        responses: { '200': { description: 'The definition.', headers: X_REQUEST_ID_HEADERS, content: DATASET } },
      }),
    },
    '/datasets/{id}/schema': {
      get: {
        ...adminOperation({
          operationId: 'getDatasetSchema',
          summary: 'JSON Schemas of valid write bodies for this dataset',
          description: 'Any key that may write to the dataset (no admin scope needed).',
          parameters: [DATASET_ID],
          codes: ['dataset_not_found'],
          responses: {
            '200': {
              description: 'JSON Schema 2020-12 of a `POST /feedback-record` body and of a `POST /feedback-response` body.',
              headers: X_REQUEST_ID_HEADERS,
              content: jsonContent({ type: 'object', required: ['dataset_id', 'updated_at', 'record_body', 'response_body'], properties: { dataset_id: { type: 'string' }, updated_at: { type: 'string' }, record_body: { type: 'object' }, response_body: { type: 'object' } } }),
            },
          },
        }),
        tags: ['datasets'],
      },
    },
  };
}

/** The batch envelope, with each item one of the three item bodies (the route checks them one by one). */
function batchBodySchema(maxItems: number): JsonSchema {
  const envelope = jsonSchemaOf(feedbackBatchBody(maxItems)) as { properties: { items: Record<string, unknown> } };
  envelope.properties.items = {
    ...envelope.properties.items,
    items: { anyOf: ['FeedbackRecordBody', 'FeedbackResponseBody', 'BatchResponseToNewRecord'].map((name) => ({ $ref: `#/components/schemas/${name}` })) },
  };
  return envelope as JsonSchema;
}

/** Codes of the read endpoints (read scope). */
const READ_CODES = [...TRANSPORT_CODES, 'unauthorized', 'invalid_api_key', 'forbidden', 'validation_failed', 'store_unavailable'] as const satisfies readonly ErrorCode[];

/** A record as the read endpoints show it (api/reads.ts builds it). */
const ResponseViewSchema = v.object({
  feedback_response_id: v.string(),
  user_id: v.string(),
  status: v.string(),
  values: v.record(v.string(), v.unknown()),
  created_at: v.pipe(v.string(), v.description('ISO 8601; acceptance time of the pair\'s first response.')),
  updated_at: v.pipe(v.string(), v.description('ISO 8601; acceptance time of the version shown.')),
});
const RecordViewSchema = v.object({
  feedback_record_id: v.string(),
  feedback_dataset_id: v.string(),
  field_to_value: v.record(v.string(), v.unknown()),
  external_id: v.exactOptional(v.string()),
  metadata: v.exactOptional(v.record(v.string(), v.unknown())),
  status: v.string(),
  created_at: v.pipe(v.string(), v.description('ISO 8601; the API\'s acceptance time. With `_id`, the listing\'s order.')),
  updated_at: v.pipe(v.string(), v.description('ISO 8601; equal to `created_at` (a record does not change; its responses do).')),
  responses: v.exactOptional(v.pipe(v.array(ResponseViewSchema), v.description('Oldest first. Absent with `responses=false`.'))),
});
type Writable<T> = { -readonly [K in keyof T]: T[K] extends readonly (infer U)[] | undefined ? U[] | Extract<T[K], undefined> : T[K] };
// The documented views and the ones the reader builds must not drift apart.
const viewsMatch: [v.InferOutput<typeof RecordViewSchema>, Writable<RecordView>, v.InferOutput<typeof ResponseViewSchema>, ResponseView] extends [Writable<RecordView>, v.InferOutput<typeof RecordViewSchema>, ResponseView, v.InferOutput<typeof ResponseViewSchema>] ? true : never = true;
void viewsMatch;

const READ_DATASET_ID = { name: 'dataset_id', in: 'path', required: true, description: 'A `feedback_dataset_id` (1-256 characters).', schema: { type: 'string', minLength: 1, maxLength: 256 } };

function readOperation(options: { operationId: string; summary: string; description: string; parameters: unknown[]; codes?: readonly ErrorCode[]; responses: Record<string, unknown> }) {
  return {
    operationId: options.operationId,
    summary: options.summary,
    description: options.description,
    tags: ['read'],
    security: [{ bearerAuth: [] }],
    parameters: [{ $ref: '#/components/parameters/X-Request-Id' }, ...options.parameters],
    responses: { ...options.responses, ...errorResponses([...READ_CODES, ...(options.codes ?? [])]) },
  };
}

function serviceOperation(options: { operationId: string; summary: string; responses: Record<string, unknown> }) {
  return {
    operationId: options.operationId,
    summary: options.summary,
    security: [],
    parameters: [{ $ref: '#/components/parameters/X-Request-Id' }],
    responses: { ...options.responses, ...errorResponses(TRANSPORT_CODES) },
  };
}

/**
 * The OpenAPI 3.1 document of the API. Request bodies are converted from the valibot schemas
 * the routes validate with (shared/schemas.ts); what JSON Schema cannot express is said in
 * descriptions (see CONVERSION). Pure: build it once, serve it many times.
 */
export function createOpenApiDocument(options: { batchRequestMaxItems: number }): OpenApiDocument {
  const perStatus: Record<string, unknown> = {};
  for (const [status, response] of Object.entries(errorResponses(ERROR_CODES))) {
    perStatus[`Error${status}`] = response;
  }
  const anyPath = errorResponses(ANY_PATH_CODES);
  return withFeedbackTokens({
    openapi: '3.1.0',
    info: {
      title: 'feedback-ingest',
      version: API_CONTRACT_VERSION,
      description:
        'Collects human feedback on LLM and chatbot output. A 200 means the write is in Redis, acknowledged, and will reach MongoDB. ' +
        'Every response carries `X-Request-Id`. Every error has the shape `{"error": {code, message, details?}}`. ' +
        'Any unknown path answers 404 `not_found` (components.responses.NotFound) and a known path with a wrong method ' +
        '405 `method_not_allowed` with `Allow` (components.responses.MethodNotAllowed).',
    },
    paths: {
      '/feedback-record': {
        post: writeOperation({
          operationId: 'postFeedbackRecord',
          summary: 'Create a record and its first response',
          description: 'Live chatbot use: one record plus its first response per call. The API mints both ids before queueing.',
          body: 'FeedbackRecordBody',
          codes: [...WRITE_CODES, 'dataset_not_found'],
        }),
      },
      '/feedback-response': {
        post: writeOperation({
          operationId: 'postFeedbackResponse',
          summary: 'Add or update a response to an existing record',
          description:
            'Annotation tools. One response per (record, annotator): a later call for the same pair updates `status` and `values` and keeps the response id.',
          body: 'FeedbackResponseBody',
          codes: [...WRITE_CODES, 'record_not_found', 'dataset_not_found'],
        }),
      },
      '/feedback-batch': {
        post: (() => {
          const op = writeOperation({
            operationId: 'postFeedbackBatch',
            summary: 'Several writes in one call (backfills, fleets that buffer)',
            description:
              `Up to ${options.batchRequestMaxItems} items (\`BATCH_REQUEST_MAX_ITEMS\`; more is 400 \`validation_failed\`), each the body of POST /feedback-record, ` +
              'the body of POST /feedback-response, or a response to a record of an earlier item of the same call (`record_index`). Items are checked one by one: ' +
              'a bad item does not block the good ones. 207 once every accepted item is queued (in Redis, acknowledged); each item has its own status, in order. ' +
              'If any accepted item could not be queued the whole call is 503 and nothing is promised: retry the whole call with the same `Idempotency-Key`. ' +
              'The body limit is `BATCH_REQUEST_MAX_BYTES` instead of `BODY_LIMIT_BYTES`. A call counts as one request for the rate limit.',
            body: 'FeedbackBatchBody',
            codes: WRITE_CODES,
          });
          const { '200': accepted, ...errors } = op.responses;
          void accepted;
          return {
            ...op,
            responses: {
              [String(BATCH_STATUS)]: {
                description: 'Multi-Status: every accepted item is in Redis, acknowledged, and will reach MongoDB; refused items carry their error.',
                headers: { ...X_REQUEST_ID_HEADERS, 'Idempotent-Replayed': ref('Idempotent-Replayed'), ...RATE_LIMIT_HEADERS },
                content: jsonContent({ $ref: '#/components/schemas/BatchResponse' }),
              },
              ...errors,
            },
          };
        })(),
      },
      '/feedback-record/{id}': {
        get: readOperation({
          operationId: 'getFeedbackRecord',
          summary: 'One stored record with all its responses',
          description: 'Read scope (or admin). An id whose signature verifies but that is not stored yet is 404 `record_pending` (retry after `Retry-After`); any other unknown id is 404 `record_not_found`.',
          parameters: [{ name: 'id', in: 'path', required: true, description: 'A `feedback_record_id` returned by a POST.', schema: { type: 'string' } }],
          codes: ['record_not_found', 'record_pending'],
          responses: { '200': { description: 'The record.', headers: X_REQUEST_ID_HEADERS, content: jsonContent({ $ref: '#/components/schemas/RecordView' }) } },
        }),
      },
      '/datasets/{dataset_id}/records': {
        get: readOperation({
          operationId: 'listDatasetRecords',
          summary: 'A page of a dataset\'s records, ordered by (created_at, _id)',
          description:
            'Read scope for the dataset (or admin). Follow `next_cursor` until it is null: a record stored before paging began is returned exactly once, whatever is written meanwhile. ' +
            `\`updated_since\`: records whose own \`updated_at\` or one of whose responses' \`updated_at\` is at or after it; at most ${UPDATED_SINCE_MAX_RECORDS} records touched by responses since then (else 400 \`validation_failed\`).`,
          parameters: [
            READ_DATASET_ID,
            { name: 'order', in: 'query', required: false, schema: { type: 'string', enum: [...RECORD_ORDERS], default: 'newest' } },
            { name: 'limit', in: 'query', required: false, schema: { type: 'integer', minimum: 1, maximum: MAX_PAGE_LIMIT, default: DEFAULT_PAGE_LIMIT } },
            { name: 'updated_since', in: 'query', required: false, description: 'ISO 8601 date-time with an offset (`Z` or `±hh:mm`).', schema: { type: 'string', format: 'date-time' } },
            { name: 'responses', in: 'query', required: false, description: 'Include each record\'s responses.', schema: { type: 'string', enum: ['true', 'false'], default: 'true' } },
            { name: 'cursor', in: 'query', required: false, description: 'The `next_cursor` of the previous page; it carries `order` and `updated_since` (changing them is 400).', schema: { type: 'string' } },
          ],
          responses: {
            '200': {
              description: 'One page.',
              headers: X_REQUEST_ID_HEADERS,
              content: jsonContent({ type: 'object', required: ['items', 'next_cursor'], properties: { items: { type: 'array', items: { $ref: '#/components/schemas/RecordView' } }, next_cursor: { type: ['string', 'null'] } } }),
            },
          },
        }),
      },
      '/datasets/{dataset_id}/export': {
        get: readOperation({
          operationId: 'exportDataset',
          summary: 'The whole dataset as NDJSON, one record with its responses per line',
          description: 'Read scope for the dataset (or admin). Streamed as the client reads; no guaranteed order; every record stored before the export began appears once. A failure after the first line cuts the connection.',
          parameters: [READ_DATASET_ID],
          responses: {
            '200': { description: 'NDJSON: each line a `RecordView` with its responses.', headers: X_REQUEST_ID_HEADERS, content: { 'application/x-ndjson': { schema: { type: 'string' } } } },
          },
        }),
      },
      '/healthz': {
        get: serviceOperation({
          operationId: 'getHealthz',
          summary: 'The process is up',
          responses: { '200': { description: 'Up.', headers: X_REQUEST_ID_HEADERS, content: jsonContent(jsonSchemaOf(HealthResponse)) } },
        }),
      },
      '/readyz': {
        get: serviceOperation({
          operationId: 'getReadyz',
          summary: 'Redis answers and the backlog is under the ceiling',
          responses: {
            '200': { description: 'Ready.', headers: X_REQUEST_ID_HEADERS, content: jsonContent({ $ref: '#/components/schemas/ReadinessResponse' }) },
            '503': { description: 'Not ready: Redis does not answer, or the backlog is above `BACKLOG_MAX_JOBS`.', headers: X_REQUEST_ID_HEADERS, content: jsonContent({ $ref: '#/components/schemas/ReadinessResponse' }) },
          },
        }),
      },
      '/metrics': {
        get: serviceOperation({
          operationId: 'getMetrics',
          summary: 'Prometheus metrics of this API process',
          responses: { '200': { description: 'Prometheus text exposition format.', headers: X_REQUEST_ID_HEADERS, content: { 'text/plain': { schema: { type: 'string' } } } } },
        }),
      },
      '/admin/dead-letters': {
        get: adminOperation({
          operationId: 'listDeadLetters',
          summary: 'List dead-lettered writes, newest first',
          parameters: [
            { name: 'reason', in: 'query', required: false, schema: { type: 'string', enum: Object.values(DeadLetterReason) } },
            { name: 'limit', in: 'query', required: false, schema: { type: 'integer', minimum: 1, maximum: MAX_LIST_LIMIT, default: DEFAULT_LIST_LIMIT } },
            { name: 'cursor', in: 'query', required: false, description: 'The `next_cursor` of the previous page.', schema: { type: 'string' } },
          ],
          codes: ['validation_failed'],
          responses: {
            '200': {
              description: 'One page.',
              headers: X_REQUEST_ID_HEADERS,
              content: jsonContent({ type: 'object', required: ['items', 'next_cursor'], properties: { items: { type: 'array', items: { $ref: '#/components/schemas/DeadLetterSummary' } }, next_cursor: { type: ['string', 'null'] } } }),
            },
          },
        }),
      },
      '/admin/dead-letters/{id}': {
        get: adminOperation({
          operationId: 'getDeadLetter',
          summary: 'One dead letter with its payload',
          parameters: [DEAD_LETTER_ID],
          codes: ['not_found'],
          responses: {
            '200': {
              description: 'The dead letter; `payload` is `payload_json` parsed when it is JSON.',
              headers: X_REQUEST_ID_HEADERS,
              content: jsonContent({ allOf: [{ $ref: '#/components/schemas/DeadLetterSummary' }, { type: 'object', required: ['payload_json', 'payload'], properties: { payload_json: { type: 'string' }, payload: {} } }] }),
            },
          },
        }),
        delete: adminOperation({
          operationId: 'purgeDeadLetter',
          summary: 'Delete one dead letter',
          parameters: [DEAD_LETTER_ID],
          codes: ['not_found'],
          responses: { '200': { description: 'Deleted.', headers: X_REQUEST_ID_HEADERS, content: jsonContent({ type: 'object', required: ['id', 'purged'], properties: { id: { type: 'string' }, purged: { const: true } } }) } },
        }),
      },
      '/admin/dead-letters/{id}/retry': {
        post: adminOperation({
          operationId: 'retryDeadLetter',
          summary: 'Queue the write again through the normal path (idempotent), keeping its acceptance order',
          parameters: [DEAD_LETTER_ID],
          codes: ['not_found', 'dead_letter_not_retryable', 'queue_unavailable'],
          responses: {
            '200': {
              description: 'Queued again; the dead letter is deleted.',
              headers: X_REQUEST_ID_HEADERS,
              content: jsonContent({ type: 'object', required: ['outcome', 'id', 'job_id', 'seq'], properties: { outcome: { const: 'requeued' }, id: { type: 'string' }, job_id: { type: 'string' }, seq: { type: ['integer', 'null'] } } }),
            },
          },
        }),
      },
      ...datasetPaths(),
      '/admin/queues': {
        get: {
          ...adminOperation({
            operationId: 'getQueueDashboard',
            summary: 'The bull-board queue dashboard (HTML; its assets and JSON API live below this path)',
            description: 'Browsers may log in with HTTP Basic: any user name, an admin key as password.',
            responses: { '200': { description: 'The dashboard page.', content: { 'text/html': { schema: { type: 'string' } } } } },
          }),
          security: [{ bearerAuth: [] }, { basicAuth: [] }],
        },
      },
      '/openapi.json': {
        get: serviceOperation({
          operationId: 'getOpenApi',
          summary: 'This document',
          responses: { '200': { description: 'OpenAPI 3.1.', headers: X_REQUEST_ID_HEADERS, content: jsonContent({ type: 'object' }) } },
        }),
      },
    },
    components: {
      securitySchemes: {
        bearerAuth: { type: 'http', scheme: 'bearer', description: 'An API key: `Authorization: Bearer <key>`.' },
        basicAuth: { type: 'http', scheme: 'basic', description: 'The dashboard only: any user name, an admin API key as password.' },
      },
      schemas: {
        FeedbackRecordBody: jsonSchemaOf(FeedbackRecordBody),
        FeedbackResponseBody: jsonSchemaOf(FeedbackResponseBody),
        FeedbackBatchBody: batchBodySchema(options.batchRequestMaxItems),
        BatchResponseToNewRecord: jsonSchemaOf(BatchResponseToNewRecord),
        AcceptedResponse: jsonSchemaOf(AcceptedResponse),
        BatchResponse: jsonSchemaOf(BatchResponse),
        ReadinessResponse: jsonSchemaOf(ReadinessResponse),
        DeadLetterSummary: jsonSchemaOf(DeadLetterSummarySchema),
        DatasetDefinitionInput: jsonSchemaOf(DatasetDefinitionInput),
        DatasetDefinition: {
          allOf: [{ $ref: '#/components/schemas/DatasetDefinitionInput' }],
          type: 'object',
          required: ['id', 'fields', 'questions', 'created_at', 'updated_at'],
          properties: { created_at: { type: 'string', description: 'ISO 8601.' }, updated_at: { type: 'string', description: 'ISO 8601; writes accepted after it are checked against this version.' } },
        },
        RecordView: jsonSchemaOf(RecordViewSchema),
        Error: jsonSchemaOf(errorBody(ERROR_CODES)),
        ErrorCode: {
          type: 'string',
          description: 'Every `error.code` the API can answer with.',
          oneOf: ERROR_CODES.map((code) => ({ const: code, description: `HTTP ${ErrorCode[code].status}. ${ErrorCode[code].description}` })),
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
        'X-Request-Id': { description: 'The request id (the caller\'s, if sane, else minted).', schema: { type: 'string' } },
        'Idempotent-Replayed': { description: '`true` when the body is the replay of an earlier call with the same `Idempotency-Key`.', schema: { type: 'string', enum: ['true'] } },
        'Retry-After': { description: 'Seconds to wait before retrying.', schema: { type: 'integer', minimum: 0 } },
        'WWW-Authenticate': { description: '`Bearer` (no or malformed header) or `Bearer error="invalid_token"` (unknown key).', schema: { type: 'string' } },
        Allow: { description: 'The methods the path accepts.', schema: { type: 'string' } },
        'RateLimit-Limit': { description: 'Write requests per minute allowed to this API key (only when a rate limit applies to it).', schema: { type: 'integer', minimum: 0 } },
        'RateLimit-Remaining': { description: 'Requests left in the current window.', schema: { type: 'integer', minimum: 0 } },
        'RateLimit-Reset': { description: 'Seconds until the window resets.', schema: { type: 'integer', minimum: 0 } },
      },
      responses: {
        ...perStatus,
        NotFound: anyPath['404'],
        MethodNotAllowed: anyPath['405'],
      },
    },
  });
}

/** The 200 body of `POST /feedback-tokens` (documentation only: the route builds it). */
const FeedbackTokenResponse = v.object({
  token: v.pipe(v.string(), v.description('A JWS (HS256): send it as `Authorization: Bearer <token>` to POST /feedback-response, and nowhere else.')),
  token_type: v.literal('Bearer'),
  expires_at: v.pipe(v.string(), v.description('ISO 8601 date-time, whole seconds.')),
  expires_in_seconds: v.pipe(v.number(), v.integer(), v.minValue(1)),
  feedback_record_id: v.string(),
  user_id: v.string(),
  questions: v.pipe(v.nullable(v.array(v.string())), v.description('The `values` keys the token may write (duplicates removed); null = any.')),
});
// The documented body and the one the route builds must not drift apart.
const tokenAnswerMatches: [v.InferOutput<typeof FeedbackTokenResponse>, FeedbackTokenAnswer] extends [FeedbackTokenAnswer, v.InferOutput<typeof FeedbackTokenResponse>] ? true : never = true;
void tokenAnswerMatches;

/** Codes a feedback token adds to POST /feedback-response. */
const TOKEN_CODES = ['token_expired', 'invalid_token', 'token_out_of_scope'] as const satisfies readonly ErrorCode[];
/** Codes of POST /feedback-tokens, in the order of the middleware that can raise them. */
const MINT_CODES = [...TRANSPORT_CODES, 'unauthorized', 'invalid_api_key', 'forbidden', 'rate_limited', 'unsupported_media_type', 'payload_too_large', 'invalid_json', 'validation_failed', 'record_not_found'] as const satisfies readonly ErrorCode[];

/** Browser feedback tokens: POST /feedback-tokens, and the token as a second way to call POST /feedback-response. */
function withFeedbackTokens(doc: OpenApiDocument): OpenApiDocument {
  const paths = doc['paths'] as Record<string, Record<string, Record<string, unknown>>>;
  const components = doc['components'] as Record<string, Record<string, unknown>>;
  const respond = paths['/feedback-response']!['post']!;
  paths['/feedback-response']!['post'] = {
    ...respond,
    description: `${String(respond['description'])} A browser may call it with a feedback token (POST /feedback-tokens) instead of an API key: the token writes only its record, as its annotator (\`user_id\` is forced to the token's), and only its questions; CORS answers the origins of \`CORS_ORIGINS\`.`,
    security: [{ bearerAuth: [] }, { feedbackToken: [] }],
    responses: { ...(respond['responses'] as Record<string, unknown>), ...errorResponses([...WRITE_CODES, 'record_not_found', 'dataset_not_found', ...TOKEN_CODES]) },
  };
  paths['/feedback-tokens'] = {
    post: {
      operationId: 'postFeedbackToken',
      summary: 'Mint a short-lived browser feedback token for one record and one annotator',
      description:
        'Server side, with an API key that may write the record\'s dataset. The token lets a browser page answer that record as `user_id` (and, with `questions`, only those `values` keys) on POST /feedback-response until `expires_at`. ' +
        'Lifetime: `expires_in_seconds`, default `FEEDBACK_TOKEN_TTL_SECONDS`, at most `FEEDBACK_TOKEN_MAX_TTL_SECONDS`.',
      security: [{ bearerAuth: [] }],
      parameters: [{ $ref: '#/components/parameters/X-Request-Id' }],
      requestBody: {
        required: true,
        description: 'JSON (`application/json`, `application/*+json`, UTF-8; a missing `Content-Type` is read as JSON).',
        content: jsonContent({ $ref: '#/components/schemas/FeedbackTokenBody' }),
      },
      responses: {
        '200': {
          description: 'The token; `Cache-Control: no-store`.',
          headers: { ...X_REQUEST_ID_HEADERS, ...RATE_LIMIT_HEADERS },
          content: jsonContent({ $ref: '#/components/schemas/FeedbackTokenResponse' }),
        },
        ...errorResponses(MINT_CODES),
      },
    },
  };
  components['securitySchemes']!['feedbackToken'] = {
    type: 'http',
    scheme: 'bearer',
    bearerFormat: 'JWT',
    description: 'A feedback token from POST /feedback-tokens: `Authorization: Bearer <token>`, on POST /feedback-response only.',
  };
  components['schemas']!['FeedbackTokenBody'] = jsonSchemaOf(FeedbackTokenBody);
  components['schemas']!['FeedbackTokenResponse'] = jsonSchemaOf(FeedbackTokenResponse);
  return doc;
}
