import { IncomingMessage, STATUS_CODES, ServerResponse } from 'node:http';
import Koa from 'koa';
import type { Logger } from '../shared/logger.js';
import type { ApiContext, ApiMiddleware, ApiState } from './state.js';

/*
 * The write routes without Koa's per-request machinery (issue 23). Koa builds three objects per
 * request, reaches every header and the status through getters and delegates, attaches
 * on-finished listeners to the socket and renders the body through its type and length setters:
 * on this service's machines that is 8-10 µs of CPU a request, a tenth of a write's. The write
 * routes run the very same middleware (request id, request log and metrics, CORS, the error
 * handler, authentication, rate limit, body parsing, the write pipeline) over a LeanContext, which
 * carries the members those middleware use; anything else (ctx.is, ctx.request, ctx.response,
 * ctx.vary) is answered by a Koa context made for the request on first use, over the same
 * req and res (those members read and write only req and res, so both views agree). So each
 * write route has one chain of middleware and one behaviour; only the carrier is lighter.
 */

/** Statuses whose answer has no body (Koa's `statuses.empty`). */
const EMPTY_STATUS = new Set([204, 205, 304]);

/** The members of a Koa context that the write routes' middleware use, kept without Koa's objects. */
class LeanContext {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly method: string;
  readonly path: string;
  state: Partial<ApiState> = {};
  /** The route label the request log and metrics read (@koa/router sets the same field). */
  _matchedRoute: string;
  #status = 404;
  #explicitStatus = false;
  #body: unknown = undefined;
  #koa: ApiContext | undefined;
  readonly #app: LeanWriteApp;

  constructor(app: LeanWriteApp, req: IncomingMessage, res: ServerResponse, path: string) {
    this.#app = app;
    this.req = req;
    this.res = res;
    this.method = req.method ?? 'GET';
    this.path = path;
    this._matchedRoute = path;
    res.statusCode = 404;
  }

  get status(): number {
    return this.#status;
  }
  set status(code: number) {
    this.#status = code;
    this.#explicitStatus = true;
    if (!this.res.headersSent) this.res.statusCode = code;
  }

  get body(): unknown {
    return this.#body;
  }
  /** As Koa: a body makes the status 200 unless one was set; no body makes it 204. */
  set body(value: unknown) {
    this.#body = value;
    if (value == null) {
      if (!EMPTY_STATUS.has(this.#status)) this.#setStatus(204);
      return;
    }
    if (!this.#explicitStatus) this.#setStatus(200);
  }

  #setStatus(code: number): void {
    this.#status = code;
    if (!this.res.headersSent) this.res.statusCode = code;
  }

  /** A request header, '' when absent (Koa's `ctx.get`). */
  get(field: string): string {
    const name = field.toLowerCase();
    const headers = this.req.headers;
    if (name === 'referer' || name === 'referrer') return headers.referrer?.toString() ?? headers.referer ?? '';
    return (headers[name] as string | undefined) ?? '';
  }

  /** Sets response headers (Koa's `ctx.set`): one, or each of an object's; none once the headers are sent. */
  set(field: string | Record<string, string | number | readonly string[]>, value?: string | number | readonly string[]): void {
    if (this.res.headersSent) return;
    if (typeof field === 'string') {
      this.res.setHeader(field, Array.isArray(value) ? value.map(String) : String(value));
      return;
    }
    for (const [name, v] of Object.entries(field)) this.set(name, v);
  }

  /** A Koa context over the same req and res, for the members this class does not carry. */
  #full(): ApiContext {
    if (this.#koa === undefined) {
      this.#koa = this.#app.createContext(this.req, this.res) as ApiContext;
      this.#koa.state = this.state as ApiState;
    }
    return this.#koa;
  }
  get request(): ApiContext['request'] {
    return this.#full().request;
  }
  get response(): ApiContext['response'] {
    return this.#full().response;
  }
  is(...types: string[]): string | false | null {
    return this.#full().is(...types);
  }
  vary(field: string): void {
    this.#full().vary(field);
  }

  /** Writes the answer as Koa's respond() would for the bodies the write routes set (JSON objects). */
  respond(): void {
    const res = this.res;
    if (res.writableEnded || res.destroyed) return;
    const status = this.#status;
    const body = this.#body;
    if (EMPTY_STATUS.has(status) || body == null) {
      if (!EMPTY_STATUS.has(status) && !res.headersSent) {
        const text = STATUS_CODES[status] ?? String(status);
        res.setHeader('Content-Type', 'text/plain; charset=utf-8');
        res.setHeader('Content-Length', Buffer.byteLength(text));
        res.end(text);
        return;
      }
      res.end();
      return;
    }
    const text = typeof body === 'string' ? body : JSON.stringify(body);
    if (!res.headersSent) {
      res.statusCode = status;
      if (!res.hasHeader('Content-Type')) res.setHeader('Content-Type', typeof body === 'string' ? 'text/plain; charset=utf-8' : 'application/json; charset=utf-8');
      res.setHeader('Content-Length', Buffer.byteLength(text));
    }
    res.end(text);
  }
}

/** `middleware` as one, chained once (koa-compose's contract: each calls `next` at most once). */
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

const done = (): Promise<void> => Promise.resolve();

/**
 * An app whose `callback()` answers `POST` on the given exact paths through their chains over a
 * LeanContext (the app-wide middleware first, as `app.use` runs them), and everything else
 * through Koa. Another spelling of these paths (a query string is fine; an absolute-form target,
 * a trailing slash) goes to Koa, whose router must mount the same chains, so that its 405 on
 * another method of the same path, and those spellings, keep working.
 */
export class LeanWriteApp extends Koa<ApiState> {
  #routes = new Map<string, ApiMiddleware>();
  #logger: Logger | undefined;

  /** Mounts the write routes: `outer` is the app-wide middleware they pass first (the same instances given to `app.use`). */
  leanRoutes(outer: readonly ApiMiddleware[], routes: Readonly<Record<string, readonly ApiMiddleware[]>>, logger: Logger): void {
    this.#routes = new Map(Object.entries(routes).map(([path, chain]) => [path, composeOnce([...outer, ...chain])]));
    this.#logger = logger;
  }

  override callback(): ReturnType<Koa<ApiState>['callback']> {
    const koa = super.callback();
    return (req, res) => {
      // HTTP/1 only (the API's server); an HTTP/2 request goes to Koa.
      if (req.method === 'POST' && req instanceof IncomingMessage && res instanceof ServerResponse) {
        const url = req.url ?? '';
        const q = url.indexOf('?');
        const path = q < 0 ? url : url.slice(0, q);
        const route = this.#routes.get(path);
        if (route !== undefined) return this.#handle(route, req, res, path);
      }
      return koa(req, res);
    };
  }

  #handle(route: ApiMiddleware, req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
    const ctx = new LeanContext(this, req, res, path);
    // The chain includes the error handler: what escapes it, or the answer's rendering, is a bug
    // (above the handler: request id, log, CORS); it is answered 500 and never crashes the process.
    return route(ctx as unknown as ApiContext, done)
      .then(() => ctx.respond())
      .catch((err: unknown) => {
        try {
          this.#fail(ctx, err);
        } catch {
          res.destroy();
        }
      });
  }

  /** A failure outside the error handler: 500 in the error shape, as Koa's own handler would answer 500 (with its text). */
  #fail(ctx: LeanContext, err: unknown): void {
    this.#logger?.error({ err, request_id: ctx.state.requestId }, 'unhandled error');
    const res = ctx.res;
    if (res.headersSent || res.writableEnded) {
      res.destroy();
      return;
    }
    for (const name of res.getHeaderNames()) res.removeHeader(name);
    if (ctx.state.requestId !== undefined) res.setHeader('X-Request-Id', ctx.state.requestId);
    ctx.status = 500;
    ctx.body = { error: { code: 'internal_error', message: 'internal error; the request was not accepted' } };
    ctx.respond();
  }
}
