import type { Middleware } from 'koa';
import { AppError } from '../../shared/errors.js';
import type { AuthenticatedKey } from './auth.js';

/** Lets through keys with the admin scope only (403 `forbidden`). Place it after `authenticate`. */
export function requireAdmin(): Middleware {
  return async (ctx, next) => {
    const key = ctx.state['apiKey'] as AuthenticatedKey | undefined;
    if (key?.admin !== true) throw new AppError('forbidden', 'this API key has no admin scope');
    await next();
  };
}
