import type { Next } from 'koa';
import type { ApiContext, ApiMiddleware } from '../state.js';

/** `middleware` as one, chained when the app is built (koa-compose's contract: each calls `next` at most once). */
export function composeOnce(middleware: readonly ApiMiddleware[]): ApiMiddleware {
  const chain = [...middleware];
  return (ctx, next) => {
    let last = -1;
    const dispatch = (i: number): Promise<void> => {
      if (i <= last) return Promise.reject(new Error('next() called multiple times'));
      last = i;
      const fn = i === chain.length ? next : chain[i];
      if (fn === undefined) return Promise.resolve();
      try {
        return Promise.resolve(fn(ctx, () => dispatch(i + 1)));
      } catch (err) {
        return Promise.reject(err);
      }
    };
    return dispatch(0);
  };
}

/**
 * The routes every write takes, found by one map lookup on method and exact path, with their
 * middleware chained once: @koa/router tests every route's pattern and chains the matched
 * route's middleware anew on each request. Routes not given here (and any other spelling of
 * these paths, such as a trailing slash) go on to the router, which must know them too, so that
 * its `allowedMethods` still answers 405 for another method on the same path. Sets the route
 * label that the request log and metrics read, as the router does.
 */
export function exactRoutes(method: string, routes: Readonly<Record<string, readonly ApiMiddleware[]>>): ApiMiddleware {
  const table = new Map(Object.entries(routes).map(([path, chain]) => [path, composeOnce(chain)]));
  return (ctx: ApiContext, next: Next) => {
    if (ctx.method !== method) return next();
    const path = ctx.path;
    const route = table.get(path);
    if (route === undefined) return next();
    (ctx as { _matchedRoute?: string })._matchedRoute = path;
    return route(ctx, next);
  };
}
