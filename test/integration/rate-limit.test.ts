import { createServer, type Server } from 'node:http';
import { Writable } from 'node:stream';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { createApp } from '../../api/app.js';
import { createBacklogMonitor } from '../../api/backlog.js';
import { createOrderClock } from '../../shared/order-clock.js';
import { createBatchingEnqueuer } from '../../api/enqueuer.js';
import { createIdempotencyStore } from '../../api/idempotency.js';
import { createApiMetrics } from '../../api/metrics.js';
import type { KeyVerifier } from '../../api/key-verifier.js';
import { createRateLimiter, effectiveLimitPerMinute } from '../../api/rate-limit.js';
import { startApi, type ApiServer } from '../../api/server.js';
import { createIdMinter } from '../../shared/ids.js';
import { createLogger } from '../../shared/logger.js';
import { createWriteQueues } from '../../shared/queue.js';
import { createRedis, type RedisClient } from '../../shared/redis.js';
import { appKeyPrefix } from '../../shared/redis-keys.js';
import { sharedServices } from '../helpers/root-hooks.js';
import { OTHER_KEY, testConfig, TEST_KEY } from '../helpers/env.js';
import { startRedis, type ManagedServer } from '../../devkit/servers.js';
import { eventually, recordBody, silentLogger, startStack, type HttpResult, type Stack } from '../helpers/stack.js';

const OTHER_AUTH = { Authorization: `Bearer ${OTHER_KEY.secret}` } as const;

function rateHeaders(res: HttpResult) {
  return {
    limit: res.headers.get('ratelimit-limit'),
    remaining: res.headers.get('ratelimit-remaining'),
    reset: res.headers.get('ratelimit-reset'),
    retryAfter: res.headers.get('retry-after'),
  };
}

/** The limiter lets requests through until Redis answers (fail open); wait for it so the counts are exact. */
function redisReady(redis: RedisClient): Promise<true> {
  return eventually(async () => (redis.status === 'ready' ? true : undefined), 10_000, 'Redis ready');
}

async function post(baseUrl: string, path: string, body: unknown, secret: string = TEST_KEY.secret): Promise<HttpResult> {
  const res = await fetch(baseUrl + path, { method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${secret}` }, body: JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text === '' ? undefined : JSON.parse(text), text };
}

describe('rate limits', () => {
  const stacks: Stack[] = [];
  const apis: ApiServer[] = [];
  afterEach(async () => {
    await Promise.all(apis.splice(0).map((a) => a.close()));
    await Promise.all(stacks.splice(0).map((s) => s.close()));
  });
  const stackWith = async (env: Record<string, string>) => {
    const stack = await startStack(testConfig(env), { worker: false });
    stacks.push(stack);
    await redisReady(stack.api.redis);
    return stack;
  };

  it('answers the 6th write of a key within the minute with 429 rate_limited, Retry-After and RateLimit-*, counting down before', async () => {
    const stack = await stackWith({ RATE_LIMIT_PER_MINUTE: '5' });
    const remaining: (string | null)[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await stack.post('/feedback-record', recordBody());
      expect(res.status, res.text).to.equal(200);
      expect(rateHeaders(res).limit).to.equal('5');
      expect(Number(rateHeaders(res).reset)).to.be.within(1, 60);
      remaining.push(rateHeaders(res).remaining);
    }
    expect(remaining).to.deep.equal(['4', '3', '2', '1', '0']);

    const limited = await stack.post('/feedback-record', recordBody());
    expect(limited.status).to.equal(429);
    expect(Object.keys(limited.body)).to.deep.equal(['error']);
    expect(limited.body.error.code).to.equal('rate_limited');
    expect(limited.body.error.message).to.be.a('string').and.not.equal('');
    const h = rateHeaders(limited);
    expect(h.limit).to.equal('5');
    expect(h.remaining).to.equal('0');
    expect(h.retryAfter).to.match(/^\d+$/);
    expect(Number(h.retryAfter)).to.be.within(1, 60);
    expect(h.reset).to.equal(h.retryAfter);
    expect(limited.headers.get('x-request-id')).to.be.a('string');

    // The other key has its own budget.
    const other = await stack.post('/feedback-record', recordBody(), OTHER_AUTH);
    expect(other.status).to.equal(200);
    expect(rateHeaders(other).remaining).to.equal('4');

    // Rejections are counted by code, like every other error.
    const metrics = await stack.request('/metrics', { method: 'GET' });
    expect(metrics.text).to.match(/^feedback_api_rejected_total\{code="rate_limited"\} 1$/m);
  });

  it('counts both write routes, and requests that fail later (validation, unknown record), in one budget per key', async () => {
    const stack = await stackWith({ RATE_LIMIT_PER_MINUTE: '3' });
    expect((await stack.post('/feedback-record', recordBody())).status).to.equal(200);
    const invalid = await stack.post('/feedback-record', { record: {} });
    expect(invalid.status).to.equal(400);
    expect(rateHeaders(invalid).remaining).to.equal('1');
    const unknown = await stack.post('/feedback-response', { feedback_record_id: 'rec_unknown', response: { status: 'draft', values: { a: 1 } } });
    expect(unknown.status).to.equal(404);
    expect(rateHeaders(unknown).remaining).to.equal('0');
    const limited = await stack.post('/feedback-response', { feedback_record_id: 'rec_unknown', response: { status: 'draft', values: { a: 1 } } });
    expect(limited.status).to.equal(429);
    // Refused before its body is read: not a 404.
    expect(limited.body.error.code).to.equal('rate_limited');
  });

  it('shares one budget per key between two API processes on the same Redis and queue', async () => {
    const stack = await stackWith({ RATE_LIMIT_PER_MINUTE: '5' });
    const second = await startApi(stack.config, silentLogger);
    apis.push(second);
    await redisReady(second.redis);
    const secondUrl = `http://127.0.0.1:${second.port}`;
    expect(second.port).to.not.equal(stack.api.port);

    const seen: string[] = [];
    for (const url of [stack.baseUrl, secondUrl, stack.baseUrl, secondUrl, stack.baseUrl]) {
      const res = await post(url, '/feedback-record', recordBody());
      expect(res.status, res.text).to.equal(200);
      seen.push(rateHeaders(res).remaining ?? '');
    }
    expect(seen).to.deep.equal(['4', '3', '2', '1', '0']);
    for (const url of [secondUrl, stack.baseUrl]) {
      const res = await post(url, '/feedback-record', recordBody());
      expect(res.status).to.equal(429);
      expect(res.body.error.code).to.equal('rate_limited');
    }
    expect((await post(secondUrl, '/feedback-record', recordBody(), OTHER_KEY.secret)).status).to.equal(200);
  });

  it('is off by default: no RateLimit headers and no 429', async () => {
    const stack = await stackWith({});
    expect(stack.config.rateLimitPerMinute).to.equal(0);
    for (let i = 0; i < 7; i++) {
      const res = await stack.post('/feedback-record', recordBody());
      expect(res.status).to.equal(200);
      expect(rateHeaders(res)).to.deep.equal({ limit: null, remaining: null, reset: null, retryAfter: null });
    }
  });

  describe('while Redis is down', () => {
    let redis: ManagedServer | undefined;
    after(async () => {
      await redis?.start().catch(() => undefined);
      await Promise.all(stacks.splice(0).map((s) => s.close()));
      await redis?.destroy();
    });

    it('lets the request through (the enqueue answers 503 queue_unavailable, not 500), counts it, and limits again once Redis is back', async () => {
      redis = await startRedis();
      const lines: { level: string; msg: string }[] = [];
      const destination = new Writable({
        write(chunk: Buffer, _enc, done) {
          for (const l of chunk.toString('utf8').split('\n')) if (l !== '') lines.push(JSON.parse(l) as { level: string; msg: string });
          done();
        },
      });
      const logger = createLogger({ level: 'info', name: 'test', destination });
      const stack = await startStack(testConfig({ RATE_LIMIT_PER_MINUTE: '5', ENQUEUE_TIMEOUT_MS: '500' }, { redisUrl: redis.url, mongoUrl: sharedServices().mongoUrl }), { worker: false, logger });
      stacks.push(stack);
      await redisReady(stack.api.redis);
      expect((await stack.post('/feedback-record', recordBody())).status).to.equal(200);
      await redis.stop();

      for (let i = 0; i < 3; i++) {
        const during = await stack.post('/feedback-record', recordBody());
        expect(during.status).to.equal(503);
        expect(during.body.error.code).to.equal('queue_unavailable');
        expect(during.headers.get('ratelimit-limit')).to.equal(null);
      }
      const metrics = await stack.request('/metrics', { method: 'GET' });
      expect(Number(/^feedback_api_rate_limit_fail_open_total (\d+)$/m.exec(metrics.text)?.[1])).to.be.at.least(3);
      // One warning per outage, not one per request.
      expect(lines.filter((l) => l.level === 'warn' && l.msg.startsWith('rate limit check failed'))).to.have.length(1);
      expect(metrics.text).to.not.match(/feedback_api_rejected_total\{code="internal_error"\}/);

      await redis.start();
      const back = await eventually(async () => {
        const res = await stack.post('/feedback-record', recordBody());
        // Until the connection is ready again, a request may still pass unchecked.
        return res.status === 200 && res.headers.get('ratelimit-limit') !== null ? res : undefined;
      }, 20_000, 'a checked 200 after Redis came back');
      // The manager's Redis is not durable: the counter of the first request may be gone.
      expect(rateHeaders(back).limit).to.equal('5');
      expect(Number(rateHeaders(back).remaining)).to.be.within(0, 4);
      expect(lines.filter((l) => l.msg === 'rate limit checks answered again')).to.have.length(1);
    });
  });

  describe('a key with its own limit (ctx.state.apiKey.rateLimitPerMinute, as stored keys carry)', () => {
    let server: Server | undefined;
    let close: (() => Promise<void>) | undefined;
    after(async () => {
      if (server !== undefined) await new Promise<void>((resolve) => server!.close(() => resolve()));
      await close?.();
    });

    it('takes the key\'s own limit over RATE_LIMIT_PER_MINUTE; 0 means unlimited for that key', async () => {
      const config = testConfig({ RATE_LIMIT_PER_MINUTE: '5' });
      const redis = createRedis(config, 'producer', silentLogger);
      const queues = createWriteQueues(config, redis);
      const metrics = createApiMetrics({ defaultMetrics: false });
      const backlog = createBacklogMonitor({ queues, maxJobs: config.backlogMaxJobs, pollMs: config.backlogPollMs, logger: silentLogger, timeoutMs: 2000 });
      const enqueuer = createBatchingEnqueuer({ queues, logger: silentLogger, metrics, clock: createOrderClock(), maxItems: 10, maxBytes: 1 << 20, maxInFlight: 1, maxPendingWrites: 1000, maxPendingBytes: 1 << 24, timeoutMs: 2000, retryAfterSeconds: 1, compression: 'none' });
      close = async () => {
        await enqueuer.drain();
        backlog.stop();
        await queues.close();
        await redis.quit();
      };
      // Stands in for the verifier of stored keys: what it returns becomes ctx.state.apiKey.
      const limits: Record<string, number> = { strict: 2, unlimited: 0 };
      const keys: KeyVerifier = {
        verify(token) {
          const own = limits[token];
          return { name: token, datasets: null, admin: false, read: false, ...(own === undefined ? {} : { rateLimitPerMinute: own }) };
        },
      };
      const app = createApp({
        logger: silentLogger,
        metrics,
        keys,
        ids: createIdMinter(config.idSigningSecrets),
        enqueuer,
        idempotency: createIdempotencyStore({ redis, prefix: appKeyPrefix(config), ttlSeconds: 60, pendingTtlSeconds: 5 }),
        backlog,
        bodyLimitBytes: config.bodyLimitBytes,
        batchRequestMaxItems: config.batchRequestMaxItems,
        batchRequestMaxBytes: config.batchRequestMaxBytes,
        retryAfterSeconds: 1,
        rateLimit: createRateLimiter({ redis, prefix: appKeyPrefix(config), defaultPerMinute: config.rateLimitPerMinute, timeoutMs: 2000, logger: silentLogger, metrics }),
      });
      server = createServer(app.callback());
      await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      await redisReady(redis);

      const strict = [];
      for (let i = 0; i < 3; i++) strict.push(await post(url, '/feedback-record', recordBody(), 'strict'));
      expect(strict.map((r) => r.status)).to.deep.equal([200, 200, 429]);
      expect(strict.map((r) => r.headers.get('ratelimit-limit'))).to.deep.equal(['2', '2', '2']);

      for (let i = 0; i < 7; i++) {
        const res = await post(url, '/feedback-record', recordBody(), 'unlimited');
        expect(res.status).to.equal(200);
        expect(res.headers.get('ratelimit-limit')).to.equal(null);
      }

      const plain = await post(url, '/feedback-record', recordBody(), 'plain');
      expect(plain.status).to.equal(200);
      expect(plain.headers.get('ratelimit-limit')).to.equal('5');
    });
  });

  describe('effectiveLimitPerMinute', () => {
    it('uses a whole, non-negative number on the key, else the default', () => {
      expect(effectiveLimitPerMinute({ name: 'a', rateLimitPerMinute: 2 }, 5)).to.equal(2);
      expect(effectiveLimitPerMinute({ name: 'a', rateLimitPerMinute: 0 }, 5)).to.equal(0);
      expect(effectiveLimitPerMinute({ name: 'a' }, 5)).to.equal(5);
      expect(effectiveLimitPerMinute({ name: 'a', rateLimitPerMinute: '2' }, 5)).to.equal(5);
      expect(effectiveLimitPerMinute({ name: 'a', rateLimitPerMinute: -1 }, 5)).to.equal(5);
      expect(effectiveLimitPerMinute({ name: 'a', rateLimitPerMinute: 1.5 }, 5)).to.equal(5);
      expect(effectiveLimitPerMinute({ name: 'a', rateLimitPerMinute: null }, 0)).to.equal(0);
    });
  });
});
