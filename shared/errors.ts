import * as v from 'valibot';

/** Headers an error answer carries besides `X-Request-Id` (documented in OpenAPI). */
export type ErrorHeader = 'WWW-Authenticate' | 'Allow' | 'Retry-After' | 'RateLimit-Limit' | 'RateLimit-Remaining' | 'RateLimit-Reset';

/**
 * Every error the API can answer with, its status and the headers it carries. The error table of docs/api.md is checked against this object
 * by a test, so a new code cannot ship undocumented.
 */
export const ErrorCode = {
  unauthorized: { status: 401, description: 'No Authorization header, or not `Bearer <token>`.', headers: ['WWW-Authenticate'] },
  invalid_api_key: { status: 401, description: 'The token is not a known, active API key.', headers: ['WWW-Authenticate'] },
  token_expired: { status: 401, description: 'The feedback token has expired; the page needs a new one from the backend that minted it.', headers: ['WWW-Authenticate'] },
  invalid_token: { status: 401, description: 'The feedback token is not valid (altered, signed with an unknown key, or not a feedback token).', headers: ['WWW-Authenticate'] },
  token_out_of_scope: { status: 403, description: 'The feedback token does not cover this record, this annotator (`user_id`) or one of these questions (`values` keys).' },
  forbidden: { status: 403, description: 'The key may not write to (or read) that dataset, has no read scope for a read, or called an admin endpoint without the admin scope.' },
  invalid_json: { status: 400, description: 'The body is not valid JSON.' },
  validation_failed: { status: 400, description: 'Missing field, wrong type, bad value or unknown property; `details` lists each.' },
  invalid_header: { status: 400, description: 'A header has a bad value (for example an `Idempotency-Key` outside 1–255 printable characters).' },
  bad_request: { status: 400, description: 'The request is not valid HTTP/1.1 (conflicting `Content-Length`, bad header bytes, …); the connection is closed.' },
  request_timeout: { status: 408, description: 'The headers or the body did not arrive within `HTTP_HEADERS_TIMEOUT_MS` / `HTTP_REQUEST_TIMEOUT_MS`; the connection is closed.' },
  headers_too_large: { status: 431, description: 'The request headers are larger than Node\'s limit (16 KiB); the connection is closed.' },
  not_found: { status: 404, description: 'Unknown path.' },
  dataset_not_found: { status: 404, description: 'The dataset has no definition and the server runs with `DATASETS=strict`; or `GET /datasets/{id}` of an undefined dataset.' },
  question_not_found: { status: 404, description: 'GET /datasets/{id}/agreement: the dataset\'s definition has no such question, or (no definition) no submitted response answers it.' },
  record_not_found: { status: 404, description: 'The record is neither stored nor accepted and queued.' },
  record_pending: { status: 404, description: 'The record id is one this service accepted, but the worker has not stored the record yet; retry after `Retry-After`.', headers: ['Retry-After'] },
  method_not_allowed: { status: 405, description: 'Known path, wrong method; `Allow` lists the methods.', headers: ['Allow'] },
  idempotency_key_reused: { status: 409, description: 'The same `Idempotency-Key` was used with a different body.' },
  dead_letter_not_retryable: { status: 409, description: 'The dead letter holds no single write that passes the queue contract (a whole malformed job, a malformed write); inspect it and purge it.' },
  idempotency_key_in_use: { status: 409, description: 'A request with the same `Idempotency-Key` is still being processed; retry shortly.', headers: ['Retry-After'] },
  payload_too_large: { status: 413, description: 'The body is larger than `BODY_LIMIT_BYTES`.' },
  unsupported_media_type: { status: 415, description: '`Content-Type` is present and not JSON, or names a charset that cannot be decoded.' },
  rate_limited: { status: 429, description: 'Per-key rate limit exceeded; see `Retry-After`.', headers: ['Retry-After', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset'] },
  internal_error: { status: 500, description: 'A bug: the request was not accepted. Logged with the request id.' },
  queue_unavailable: { status: 503, description: 'Redis is unreachable or did not acknowledge the write in time; nothing was promised.', headers: ['Retry-After'] },
  store_unavailable: { status: 503, description: 'MongoDB did not answer a read (or has not answered since the API process started, so that the stored API keys or, with `DATASETS=strict`, the dataset definitions are not loaded yet); retry after `Retry-After`.', headers: ['Retry-After'] },
  overloaded: { status: 503, description: 'The backlog is above `BACKLOG_MAX_JOBS`; retry after `Retry-After`.', headers: ['Retry-After'] },
} as const satisfies Record<string, { status: number; description: string; headers?: readonly ErrorHeader[] }>;

export type ErrorCode = keyof typeof ErrorCode;

/** One problem of a refused request: where (`response.values`) and what. */
export const ErrorDetail = v.object({ path: v.string(), message: v.string() });
export type ErrorDetail = v.InferOutput<typeof ErrorDetail>;

/** The one error type of the service: a code from {@link ErrorCode}, its HTTP status and details. */
export class AppError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly details: readonly ErrorDetail[] | undefined;
  readonly headers: Readonly<Record<string, string>>;

  constructor(
    code: ErrorCode,
    message: string,
    options: { details?: readonly ErrorDetail[]; headers?: Record<string, string>; cause?: unknown } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'AppError';
    this.code = code;
    this.status = ErrorCode[code].status;
    this.details = options.details;
    this.headers = options.headers ?? {};
  }
}

export function isAppError(err: unknown): err is AppError {
  return err instanceof AppError;
}
