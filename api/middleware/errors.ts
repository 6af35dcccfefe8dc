import type { Middleware } from 'koa';
import { AppError, isAppError } from '../../shared/errors.js';
import type { Logger } from '../../shared/logger.js';
import type { ApiMetrics } from '../metrics.js';

interface HttpishError {
  status?: unknown;
  statusCode?: unknown;
  type?: unknown;
  expose?: unknown;
  message?: unknown;
}

/** Maps what raw-body/co-body (inside koa-bodyparser) throw to the codes of the contract. */
function fromBodyError(err: HttpishError): AppError | undefined {
  const status = typeof err.status === 'number' ? err.status : typeof err.statusCode === 'number' ? err.statusCode : undefined;
  if (status === undefined) return undefined;
  switch (err.type) {
    case 'entity.too.large':
      return new AppError('payload_too_large', 'the body is larger than the limit');
    case 'charset.unsupported':
    case 'encoding.unsupported':
      return new AppError('unsupported_media_type', typeof err.message === 'string' ? err.message : 'unsupported encoding');
    case 'entity.verify.failed':
    case 'entity.parse.failed':
    case 'request.size.invalid':
    case 'request.aborted':
      return new AppError('invalid_json', 'the body is not valid JSON');
    default:
      break;
  }
  if (status === 413) return new AppError('payload_too_large', 'the body is larger than the limit');
  if (status === 415) return new AppError('unsupported_media_type', 'the body is not JSON');
  // co-body's JSON.parse failures carry status 400 without a type.
  if (status === 400) return new AppError('invalid_json', 'the body is not valid JSON');
  return undefined;
}

/** Renders every error as `{"error": {code, message, details}}`; nothing else reaches Koa. */
export function errorHandler(options: { logger: Logger; metrics: ApiMetrics }): Middleware {
  return async (ctx, next) => {
    try {
      await next();
    } catch (caught) {
      let err: AppError;
      if (isAppError(caught)) err = caught;
      else {
        const mapped = typeof caught === 'object' && caught !== null ? fromBodyError(caught as HttpishError) : undefined;
        if (mapped !== undefined) err = mapped;
        else {
          const log = (ctx.state['log'] as Logger | undefined) ?? options.logger;
          log.error({ err: caught }, 'unhandled error');
          err = new AppError('internal_error', 'internal error; the request was not accepted');
        }
      }
      options.metrics.rejected.inc({ code: err.code });
      ctx.status = err.status;
      for (const [name, value] of Object.entries(err.headers)) ctx.set(name, value);
      ctx.body = { error: { code: err.code, message: err.message, ...(err.details === undefined ? {} : { details: err.details }) } };
    }
  };
}
