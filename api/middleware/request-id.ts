import { randomUUID } from 'node:crypto';
import type { ApiMiddleware } from '../state.js';

const SANE_ID_RE = /^[\x21-\x7e]{1,200}$/;

/** Keeps the caller's X-Request-Id when it is 1-200 printable characters, else mints one. */
export function requestId(): ApiMiddleware {
  return async (ctx, next) => {
    const given = ctx.get('X-Request-Id');
    const id = SANE_ID_RE.test(given) ? given : randomUUID();
    ctx.state.requestId = id;
    ctx.set('X-Request-Id', id);
    await next();
  };
}
