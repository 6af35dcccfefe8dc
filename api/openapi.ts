import * as v from 'valibot';
import { DeadLetterDetail, DeadLetterListQuery, DeadLetterPage, DeadLetterRequeued, DeadLetterSummary } from '../shared/dead-letter-admin.js';
import type { ErrorCode } from '../shared/errors.js';
import { FeedbackRecordBody, FeedbackResponseBody } from '../shared/schemas.js';
import { IDEMPOTENCY_KEY_RE } from './idempotency.js';
import { buildOpenApiDocument, type OpenApiDocument, type OperationSpec, type Paths } from './openapi-build.js';
import { DeadLetterPurged } from './routes/dead-letters.js';
import { AcceptedBody } from './routes/feedback.js';
import { HealthBody, ReadinessBody } from './routes/service.js';

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

/** Codes of both write endpoints after authentication, in the order of the steps that raise them. */
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

/** A write endpoint: a JSON body in, the accepted ids out. */
function write(spec: { operationId: string; summary: string; description: string; body: v.GenericSchema; codes?: readonly ErrorCode[] }): OperationSpec {
  return {
    ...spec,
    access: 'key',
    headers: ['Idempotency-Key'],
    body: { schema: spec.body, description: 'JSON (`application/json`, `application/*+json`, UTF-8; a missing `Content-Type` is read as JSON).' },
    answers: {
      200: {
        description: 'The write is in Redis, acknowledged, and will reach MongoDB.',
        json: AcceptedBody,
        headers: ['Idempotent-Replayed', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset'],
      },
    },
    codes: [...WRITE_CODES, ...(spec.codes ?? [])],
  };
}

const DEAD_LETTER_ID = { id: 'The dead letter\'s id (`<queue>:w:<seq>:<response id>`, or `<queue>:job:…` for whole jobs and writes of earlier releases).' };

const PATHS: Paths = {
  '/feedback-record': {
    post: write({
      operationId: 'postFeedbackRecord',
      summary: 'Create a record and its first response',
      description: 'Live chatbot use: one record plus its first response per call. The API mints both ids before queueing.',
      body: FeedbackRecordBody,
    }),
  },
  '/feedback-response': {
    post: write({
      operationId: 'postFeedbackResponse',
      summary: 'Add or update a response to an existing record',
      description: 'Annotation tools. One response per (record, annotator): a later call for the same pair updates `status` and `values` and keeps the response id.',
      body: FeedbackResponseBody,
      codes: ['record_not_found'],
    }),
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
};

/**
 * The OpenAPI 3.1 document of the API. What JSON Schema cannot express of the request schemas is
 * said in descriptions (api/openapi-build.ts). Pure: build it once, serve it many times.
 */
export function createOpenApiDocument(): OpenApiDocument {
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
    paths: PATHS,
    schemas: { FeedbackRecordBody, FeedbackResponseBody, AcceptedResponse: AcceptedBody, ReadinessResponse: ReadinessBody, DeadLetterSummary },
    components: {
      securitySchemes: {
        bearerAuth: { type: 'http', scheme: 'bearer', description: 'An API key: `Authorization: Bearer <key>`.' },
        basicAuth: { type: 'http', scheme: 'basic', description: 'The dashboard only: any user name, an admin API key as password.' },
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
    },
  });
}
