import cors from '@koa/cors';
import type { ApiMiddleware } from '../state.js';

/** Request headers a browser page may send (asked for in the preflight). */
const ALLOW_HEADERS = ['Authorization', 'Content-Type', 'Idempotency-Key', 'X-Request-Id'];
/** Response headers a page may read besides the CORS-safelisted ones. */
const EXPOSE_HEADERS = ['X-Request-Id', 'Retry-After', 'Idempotent-Replayed', 'WWW-Authenticate', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset'];
/** How long a browser may reuse a preflight, s. */
const PREFLIGHT_MAX_AGE_SECONDS = 600;

/**
 * CORS for the browser-facing routes only (`paths`), for the configured origins only
 * (`CORS_ORIGINS`). Other paths and other origins get no CORS header at all, so a browser
 * refuses the call; a preflight from an allowed origin is answered 204 here, before routing.
 * No credentials mode: a page authenticates with a bearer feedback token, never cookies.
 * Error answers (401 `token_expired`) must carry the headers too, or the page cannot read them:
 * `keepHeadersOnError` copies them onto an error thrown below, and placed outside the error
 * handler they also stay on the errors it renders afresh (500 `internal_error`).
 */
export function browserCors(options: { origins: readonly string[]; paths: readonly string[]; methods: readonly string[] }): ApiMiddleware {
  const origins = new Set(options.origins);
  const paths = new Set(options.paths);
  const handle = cors({
    origin: (ctx) => {
      const origin = ctx.get('Origin');
      return origins.has(origin) ? origin : '';
    },
    allowMethods: [...options.methods],
    allowHeaders: ALLOW_HEADERS,
    exposeHeaders: EXPOSE_HEADERS,
    maxAge: PREFLIGHT_MAX_AGE_SECONDS,
    credentials: false,
    keepHeadersOnError: true,
  });
  return async (ctx, next) => {
    if (!paths.has(ctx.path)) {
      await next();
      return;
    }
    await handle(ctx, next);
  };
}
