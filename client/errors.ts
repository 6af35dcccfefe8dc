import type { ErrorCode, ErrorDetail } from '../shared/errors.js';

/**
 * What a failed call reports in `code`: the server's `error.code` (the codes of shared/errors.ts,
 * documented in docs/api.md), or one of the client's own when no error body came back:
 * `network_error` (no answer), `timeout` (the call's `timeoutMs` ran out), `aborted` (the
 * caller's signal), `unexpected_response` (an answer that is not the service's JSON).
 */
export type FeedbackErrorCode = ErrorCode | 'network_error' | 'timeout' | 'aborted' | 'unexpected_response';

/** The one error type of the client: a server error with its code and details, or a transport failure. */
export class FeedbackApiError extends Error {
  /** HTTP status of the last answer; undefined when none came back. */
  readonly status: number | undefined;
  readonly code: FeedbackErrorCode;
  /** With `validation_failed`: every problem, with its JSON path. */
  readonly details: readonly ErrorDetail[] | undefined;
  /** `X-Request-Id` of the last answer (give it to the service's operators: it is in their logs). */
  readonly requestId: string | undefined;
  /** `Retry-After` of the last answer, ms. */
  readonly retryAfterMs: number | undefined;
  /** Attempts made, the first included. */
  readonly attempts: number;
  /** The Idempotency-Key every attempt of this call carried (writes only): retrying the same write later with it stays safe. */
  readonly idempotencyKey: string | undefined;

  constructor(fields: {
    message: string;
    code: FeedbackErrorCode;
    status?: number | undefined;
    details?: readonly ErrorDetail[] | undefined;
    requestId?: string | undefined;
    retryAfterMs?: number | undefined;
    attempts: number;
    idempotencyKey?: string | undefined;
    cause?: unknown;
  }) {
    super(fields.message, fields.cause === undefined ? undefined : { cause: fields.cause });
    this.name = 'FeedbackApiError';
    this.code = fields.code;
    this.status = fields.status;
    this.details = fields.details;
    this.requestId = fields.requestId;
    this.retryAfterMs = fields.retryAfterMs;
    this.attempts = fields.attempts;
    this.idempotencyKey = fields.idempotencyKey;
  }
}

export function isFeedbackApiError(err: unknown): err is FeedbackApiError {
  return err instanceof FeedbackApiError;
}
