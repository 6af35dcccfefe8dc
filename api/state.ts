import type { Middleware, ParameterizedContext } from 'koa';
import { AppError } from '../shared/errors.js';
import type { Logger } from '../shared/logger.js';
import type { FeedbackTokenScope } from './feedback-tokens.js';
import type { AuthenticatedKey } from './key-verifier.js';

/**
 * What the middleware of a request leave in `ctx.state`, typed once: `Koa<ApiState>` and
 * `Router<ApiState>` give every route and middleware this type, so nothing reads the state by
 * string or casts it.
 */
export interface ApiState {
  /** Set by the request-id middleware, first of all. */
  requestId: string;
  /** The request's child logger (with its `request_id`), made on first use (request-log). */
  readonly log: Logger;
  /** The key the request authenticated with (after `authenticate`). */
  apiKey?: AuthenticatedKey;
  /** The browser feedback token the request authenticated with, on routes that take one. */
  feedbackToken?: FeedbackTokenScope;
  /** The parsed JSON body (after `jsonBody`). */
  body?: unknown;
  /** Bytes of the body after any inflation (after `jsonBody`). */
  bodyBytes?: number;
  /** The request is the dashboard's (bull-board renders it). */
  dashboard?: boolean;
}

export type ApiContext = ParameterizedContext<ApiState>;
export type ApiMiddleware = Middleware<ApiState>;
/** A route's context with its path parameters (@koa/router). */
export type ApiParamsContext = ApiContext & { params: Record<string, string> };

/** The key of a request on a route behind `authenticate`; a route mounted without it is a bug (500). */
export function authenticatedKey(ctx: ApiContext): AuthenticatedKey {
  const key = ctx.state.apiKey;
  if (key === undefined) throw new AppError('internal_error', 'route mounted without authenticate');
  return key;
}
