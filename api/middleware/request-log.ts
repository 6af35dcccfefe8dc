import type { ApiMiddleware } from '../state.js';
import type { Logger } from '../../shared/logger.js';
import type { ApiMetrics } from '../metrics.js';

/** `ctx.state` of a request: `log`, its child logger, is made on first use. */
class RequestState {
  readonly #root: Logger;
  readonly #requestId: string;
  #log: Logger | undefined;
  constructor(root: Logger, requestId: string) {
    this.#root = root;
    this.#requestId = requestId;
  }
  get log(): Logger {
    return (this.#log ??= this.#root.child({ request_id: this.#requestId }));
  }
}

/**
 * One log line and the HTTP metrics per request, after everything below it ran. `ctx.state.log`
 * is the request's child logger (with its `request_id`), made on first use: most requests log
 * nothing but the request line.
 *
 * The request line holds only fields this middleware chooses (id, method, path, status, ms, the
 * key's name, the error code), never a header, secret or body, so it is written by a child that
 * skips the redaction pass; every other line keeps the root logger's redaction.
 */
export function requestLog(options: { logger: Logger; metrics: ApiMetrics }): ApiMiddleware {
  const { logger, metrics } = options;
  const lines = logger.child({}, { redact: [] });
  return async (ctx, next) => {
    const started = process.hrtime.bigint();
    const requestId = ctx.state.requestId;
    ctx.state = Object.assign(new RequestState(logger, requestId), ctx.state);
    try {
      await next();
    } finally {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const route = (ctx as { _matchedRoute?: unknown })._matchedRoute;
      const routeLabel = typeof route === 'string' ? route : 'unmatched';
      const status = ctx.status;
      metrics.httpRequests.inc({ route: routeLabel, method: ctx.method, status: String(status) });
      metrics.httpSeconds.observe({ route: routeLabel, method: ctx.method }, seconds);
      if (lines.isLevelEnabled('info')) {
        const apiKey = ctx.state.apiKey?.name;
        const errorCode = (ctx.body as { error?: { code?: string } } | undefined)?.error?.code;
        lines.info({ request_id: requestId, method: ctx.method, path: ctx.path, status, ms: Math.round(seconds * 1e4) / 10, api_key: apiKey, error: errorCode }, 'request');
      }
    }
  };
}
