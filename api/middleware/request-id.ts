import { randomUUID } from 'node:crypto';
import type { ApiMiddleware } from '../state.js';

const SANE_ID_RE = /^[\x21-\x7e]{1,200}$/;

/** Keeps the caller's X-Request-Id when it is 1-200 printable characters, else mints one. */
export function requestId(): ApiMiddleware {
  // Not async: nothing to wait for before `next` (one promise layer less per request).
  return (ctx, next) => {
    const given = ctx.get('X-Request-Id');
    const id = SANE_ID_RE.test(given) ? given : randomUUID();
    ctx.state.requestId = id;
    ctx.set('X-Request-Id', id);
    return next();
  };
}
