import type { ApiMiddleware } from '../state.js';
import { AppError } from '../../shared/errors.js';

/** Lets through keys with the admin scope only (403 `forbidden`). Place it after `authenticate`. */
export function requireAdmin(): ApiMiddleware {
  return async (ctx, next) => {
    const key = ctx.state.apiKey;
    if (key?.admin !== true) throw new AppError('forbidden', 'this API key has no admin scope');
    await next();
  };
}
