/**
 * The client's retry policy, as pure functions (no clock, no randomness of its own), so that it
 * can be tested alone: what is retried, how long to wait, when to give up.
 */

/** What one attempt of a call ended with. */
export type AttemptOutcome =
  /** No HTTP answer: connection refused or reset, DNS, a proxy that dropped the answer. */
  | { readonly kind: 'network' }
  /** The attempt's own timeout fired before the answer was read. */
  | { readonly kind: 'timeout' }
  /** An HTTP answer that is not a success. */
  | { readonly kind: 'status'; readonly status: number; readonly code?: string | undefined; readonly retryAfterMs?: number | undefined };

export interface RetryPolicy {
  /** Attempts per logical call, the first included. Default 8. */
  readonly maxAttempts: number;
  /** Base of the exponential backoff, ms. Default 250. */
  readonly baseDelayMs: number;
  /** Cap of one backoff (before `Retry-After`, which is honoured above it), ms. Default 20,000. */
  readonly maxDelayMs: number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = Object.freeze({ maxAttempts: 8, baseDelayMs: 250, maxDelayMs: 20_000 });

/**
 * Worth another attempt with the same Idempotency-Key: no answer (the write may or may not have
 * happened), a timeout, 503 (queue or store unavailable, overloaded), 502/504 (a gateway), 429,
 * and 409 `idempotency_key_in_use` (an earlier attempt of this very call is still running on the
 * server, typically after a timeout). Every other answer is final: retrying a 400 or a 403 gives
 * the same answer, and a 500 is a bug, not a moment.
 */
export function isRetryable(outcome: AttemptOutcome): boolean {
  if (outcome.kind !== 'status') return true;
  if (outcome.status === 429 || outcome.status === 502 || outcome.status === 503 || outcome.status === 504) return true;
  return outcome.status === 409 && outcome.code === 'idempotency_key_in_use';
}

/**
 * `Retry-After` as ms from `nowMs`: delta-seconds or an HTTP-date (RFC 9110 §10.2.3); undefined
 * when absent or malformed.
 */
export function parseRetryAfter(header: string | null | undefined, nowMs: number): number | undefined {
  if (header === null || header === undefined) return undefined;
  const text = header.trim();
  if (/^\d{1,9}$/.test(text)) return Number(text) * 1000;
  if (!/[a-z]/i.test(text)) return undefined;
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, at - nowMs);
}

/**
 * The wait before attempt `attempt + 1`, after `attempt` attempts: "full jitter" exponential
 * backoff (uniform in [0, min(maxDelayMs, baseDelayMs · 2^(attempt-1))]), so that a fleet that
 * failed together does not retry together. A `Retry-After` is a floor, plus up to one base delay
 * of jitter for the same reason. `random` returns values in [0, 1).
 */
export function retryDelayMs(attempt: number, outcome: AttemptOutcome, policy: RetryPolicy, random: () => number): number {
  const cap = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** Math.max(0, attempt - 1));
  const backoff = random() * cap;
  const retryAfterMs = outcome.kind === 'status' ? outcome.retryAfterMs : undefined;
  if (retryAfterMs === undefined) return backoff;
  return Math.max(retryAfterMs, backoff) + random() * policy.baseDelayMs;
}

export type RetryDecision = { readonly retry: true; readonly delayMs: number } | { readonly retry: false; readonly reason: 'final' | 'attempts' | 'deadline' };

/**
 * Whether to try again after `attempt` attempts ended with `outcome`, and after how long: never
 * for a final answer, nor past `maxAttempts`, nor when the wait would end after `remainingMs`
 * (the call's own timeout).
 */
export function nextStep(options: { attempt: number; outcome: AttemptOutcome; policy: RetryPolicy; remainingMs: number; random: () => number }): RetryDecision {
  const { attempt, outcome, policy, remainingMs, random } = options;
  if (!isRetryable(outcome)) return { retry: false, reason: 'final' };
  if (attempt >= policy.maxAttempts) return { retry: false, reason: 'attempts' };
  const delayMs = retryDelayMs(attempt, outcome, policy, random);
  if (delayMs >= remainingMs) return { retry: false, reason: 'deadline' };
  return { retry: true, delayMs };
}
