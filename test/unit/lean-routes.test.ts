import { expect } from 'chai';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { LeanWriteApp } from '../../api/lean-routes.js';
import type { ApiMiddleware } from '../../api/state.js';
import { createLogger } from '../../shared/logger.js';

/*
 * The carrier of the write routes (api/lean-routes.ts) over a real HTTP server: which requests it
 * takes, that the context members the write routes' middleware use behave as Koa's do, and that a
 * failure outside the error handler (or in rendering the answer) is a 500 in the error shape and
 * never takes the process down. The write routes' behaviour itself is tested through the API.
 */

describe('lean write routes (api/lean-routes.ts)', () => {
  let server: Server;
  let base: string;
  const logged: string[] = [];

  before(async () => {
    const app = new LeanWriteApp();
    const outer: ApiMiddleware[] = [
      async (ctx, next) => {
        ctx.state.requestId = 'rid-1';
        ctx.set('X-Request-Id', 'rid-1');
        await next();
      },
    ];
    const echo: ApiMiddleware = (ctx) => {
      ctx.set({ 'X-Set-Object': '7' });
      ctx.vary('Origin');
      ctx.body = { route: (ctx as { _matchedRoute?: string })._matchedRoute, is: ctx.is('application/json', 'application/*+json'), charset: ctx.request.charset, path: ctx.path };
      return Promise.resolve();
    };
    const created: ApiMiddleware = (ctx) => {
      ctx.status = 201;
      ctx.body = { ok: true };
      return Promise.resolve();
    };
    const throws: ApiMiddleware = () => Promise.reject(new Error('a bug'));
    const unrenderable: ApiMiddleware = (ctx) => {
      ctx.body = { n: 1n };
      return Promise.resolve();
    };
    const sink = new Writable({ write: (chunk: Buffer, _enc, cb) => { logged.push(chunk.toString()); cb(); } });
    app.leanRoutes(outer, { '/echo': [echo], '/created': [created], '/throws': [throws], '/unrenderable': [unrenderable] }, createLogger({ level: 'error', name: 'test', destination: sink }));
    // What Koa answers: anything the lean routes do not take.
    app.use((ctx) => {
      ctx.body = { koa: true, method: ctx.method, path: ctx.path };
    });
    server = createServer(app.callback());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  const post = (path: string, headers: Record<string, string> = {}) => fetch(base + path, { method: 'POST', headers: { 'Content-Type': 'application/json; charset=latin1', ...headers }, body: '{}' });

  it('takes POST on its exact paths, with or without a query string, and leaves other methods and paths to Koa', async () => {
    const lean = await post('/echo?x=1');
    expect(await lean.json()).to.deep.equal({ route: '/echo', is: 'application/json', charset: 'latin1', path: '/echo' });
    for (const [method, path] of [['GET', '/echo'], ['POST', '/echo/'], ['POST', '/other']] as const) {
      const res = await fetch(base + path, { method, ...(method === 'POST' ? { body: '{}' } : {}) });
      expect(await res.json(), `${method} ${path}`).to.deep.equal({ koa: true, method, path });
    }
  });

  it('answers as Koa would: JSON with its type and length, headers set before (one or an object of them), Vary appended, an explicit status kept', async () => {
    const res = await post('/echo');
    const text = await res.text();
    expect(res.status).to.equal(200);
    expect(res.headers.get('content-type')).to.equal('application/json; charset=utf-8');
    expect(res.headers.get('content-length')).to.equal(String(Buffer.byteLength(text)));
    expect(res.headers.get('x-request-id')).to.equal('rid-1');
    expect(res.headers.get('x-set-object')).to.equal('7');
    expect(res.headers.get('vary')).to.equal('Origin');
    const created = await post('/created');
    expect(created.status).to.equal(201);
    expect(await created.json()).to.deep.equal({ ok: true });
  });

  it('a failure outside the error handler is 500 internal_error in the error shape, with the request id, and logged', async () => {
    const res = await post('/throws');
    expect(res.status).to.equal(500);
    expect(res.headers.get('x-request-id')).to.equal('rid-1');
    expect(await res.json()).to.deep.equal({ error: { code: 'internal_error', message: 'internal error; the request was not accepted' } });
    expect(logged.join('')).to.include('a bug');
  });

  it('an answer that cannot be rendered is a 500 too, and the server goes on answering', async () => {
    const res = await post('/unrenderable');
    expect(res.status).to.equal(500);
    expect((await res.json()) as unknown).to.have.nested.property('error.code', 'internal_error');
    expect((await post('/created')).status).to.equal(201);
  });
});
