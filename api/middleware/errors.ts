import type { ApiMiddleware } from '../state.js';
import { AppError, isAppError } from '../../shared/errors.js';
import type { Logger } from '../../shared/logger.js';
import type { ApiMetrics } from '../metrics.js';
import { isStoreDown, storeUnavailable } from '../store-down.js';

/**
 * Renders every error as `{"error": {code, message, details}}`; nothing else reaches Koa. MongoDB
 * not answering, on a route that does not say more itself (the admin endpoints), is 503
 * `store_unavailable` with `Retry-After` (`retryAfterSeconds`), never a 500.
 */
export function errorHandler(options: { logger: Logger; metrics: ApiMetrics; retryAfterSeconds?: number }): ApiMiddleware {
  return async (ctx, next) => {
    try {
      await next();
    } catch (caught) {
      let err: AppError;
      if (isAppError(caught)) err = caught;
      else if (isStoreDown(caught)) err = storeUnavailable(options.retryAfterSeconds ?? 1, 'MongoDB did not answer; retry later', caught);
      else {
        const log = ctx.state.log ?? options.logger;
        log.error({ err: caught }, 'unhandled error');
        err = new AppError('internal_error', 'internal error; the request was not accepted');
      }
      options.metrics.rejected.inc({ code: err.code });
      ctx.status = err.status;
      for (const [name, value] of Object.entries(err.headers)) ctx.set(name, value);
      ctx.body = { error: { code: err.code, message: err.message, ...(err.details === undefined ? {} : { details: err.details }) } };
    }
  };
}
