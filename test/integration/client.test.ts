import { expect } from 'chai';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createFeedbackClient, FeedbackApiError, type FeedbackClient } from '../../client/index.js';
import { sharedServices } from '../helpers/root-hooks.js';
import { testConfig, TEST_KEY } from '../helpers/env.js';
import { startRedis, type ManagedServer } from '../../devkit/servers.js';
import { eventually, recordBody, records, responses, startStack, type Stack } from '../helpers/stack.js';

/*
 * The typed client (client/) against the real API, Redis and FerretDB: answers and errors as
 * typed objects, a lost answer retried with the same Idempotency-Key, and a Redis outage in the
 * middle of a loop of calls.
 */

/** fetch that counts attempts and their outcomes (the client takes any fetch). */
function countingFetch() {
  const seen = { attempts: 0, failed: 0 };
  const fetchImpl: typeof fetch = async (input, init) => {
    seen.attempts++;
    try {
      const res = await fetch(input, init);
      if (!res.ok) seen.failed++;
      return res;
    } catch (err) {
      seen.failed++;
      throw err;
    }
  };
  return { seen, fetchImpl };
}

/**
 * A proxy in front of the API that forwards every request and, when `drop(n)` says so for the
 * n-th request, closes the client's connection instead of passing the answer on: the API did
 * the work, the client never hears of it.
 */
async function droppingProxy(target: string, drop: (n: number) => boolean): Promise<{ url: string; forwarded: () => number; close: () => Promise<void> }> {
  let count = 0;
  const server: Server = createServer((req, res) => {
    const n = ++count;
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const headers: Record<string, string> = {};
      for (const [name, value] of Object.entries(req.headers)) {
        if (typeof value === 'string' && !['host', 'connection', 'content-length', 'transfer-encoding'].includes(name)) headers[name] = value;
      }
      void (async () => {
        const upstream = await fetch(target + (req.url ?? '/'), { method: req.method ?? 'GET', headers, ...(chunks.length > 0 ? { body: Buffer.concat(chunks) } : {}) });
        const text = await upstream.text();
        if (drop(n)) {
          req.socket.destroy();
          return;
        }
        res.writeHead(upstream.status, Object.fromEntries(upstream.headers));
        res.end(text);
      })().catch(() => req.socket.destroy());
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    forwarded: () => count,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** The FeedbackApiError `call` rejects with; fails when it resolves. */
async function rejection(call: Promise<unknown>): Promise<FeedbackApiError> {
  const err = await call.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).to.be.instanceOf(FeedbackApiError);
  return err as FeedbackApiError;
}

async function countByExternalId(stack: Stack, prefix: string): Promise<Map<string, number>> {
  const docs = await records(stack.db).find({ external_id: { $regex: `^${prefix}` } }, { projection: { external_id: 1 } }).toArray();
  const counts = new Map<string, number>();
  for (const d of docs) counts.set(d['external_id'] as string, (counts.get(d['external_id'] as string) ?? 0) + 1);
  return counts;
}

describe('createFeedbackClient', () => {
  let stack: Stack;
  let client: FeedbackClient;
  before(async () => {
    stack = await startStack(testConfig());
    client = createFeedbackClient({ baseUrl: stack.baseUrl, apiKey: TEST_KEY.secret });
  });
  after(async () => {
    await stack?.close();
  });

  it('createRecord, respond and createRecords answer with the ids of the API, and the writes are stored', async () => {
    const created = await client.createRecord(recordBody({ record: { external_id: 'c-1' } }));
    expect(created.status).to.equal('submitted');
    const answered = await client.respond({ feedback_record_id: created.feedback_record_id, response: { status: 'draft', values: { helpful: 3 }, user_id: 'annotator-4' } });
    expect(answered.feedback_record_id).to.equal(created.feedback_record_id);
    const batch = await client.createRecords([recordBody({ record: { external_id: 'c-2' } }), { record_index: 0, response: { status: 'submitted', values: { helpful: 1 }, user_id: 'annotator-5' } }, { feedback_record_id: 'rec_unknown', response: { status: 'draft', values: { a: 1 } } }]);
    expect(batch.accepted).to.equal(2);
    expect(batch.items.map((i) => i.status)).to.deep.equal([200, 200, 404]);
    const first = batch.items[0]!;
    if (!('result' in first)) throw new Error('item 0 was refused');
    await eventually(async () => ((await responses(stack.db).countDocuments({ feedback_record_id: { $in: [created.feedback_record_id, first.result.feedback_record_id] } })) === 4 ? true : undefined), 20_000, 'both records with two responses each');
  });

  it('a refused write rejects with a FeedbackApiError carrying the server code, details, status and X-Request-Id, after one attempt', async () => {
    const { seen, fetchImpl } = countingFetch();
    const counted = createFeedbackClient({ baseUrl: stack.baseUrl, apiKey: TEST_KEY.secret, fetch: fetchImpl });
    const apiErr = await rejection(counted.createRecord({ record: { feedback_dataset_id: 'ds_test', field_to_value: {} }, response: { values: { a: 1 } } }, { requestId: 'client-test-1' }));
    expect(apiErr.status).to.equal(400);
    expect(apiErr.code).to.equal('validation_failed');
    expect(apiErr.details).to.deep.equal([{ path: 'record.field_to_value', message: 'must have at least one key' }]);
    expect(apiErr.requestId).to.equal('client-test-1');
    expect(apiErr.attempts).to.equal(1);
    expect(seen.attempts).to.equal(1);
    const unauthorized = await rejection(createFeedbackClient({ baseUrl: stack.baseUrl, apiKey: 'not-a-key' }).createRecord(recordBody()));
    expect(unauthorized.code).to.equal('invalid_api_key');
    expect(unauthorized.status).to.equal(401);
  });

  it('an answer lost after the API queued the write: the retry carries the same Idempotency-Key and the record is stored once, with the id the client got', async () => {
    const proxy = await droppingProxy(stack.baseUrl, (n) => n === 1);
    try {
      const lossy = createFeedbackClient({ baseUrl: proxy.url, apiKey: TEST_KEY.secret, retry: { baseDelayMs: 20 } });
      const created = await lossy.createRecord(recordBody({ record: { external_id: 'lost-answer-1' } }));
      expect(proxy.forwarded(), 'the first answer was dropped, the second passed').to.equal(2);
      const stored = await eventually(async () => (await records(stack.db).findOne({ external_id: 'lost-answer-1' })) ?? undefined, 20_000, 'the record');
      expect(stored._id).to.equal(created.feedback_record_id);
      await eventually(async () => ((await stack.api.queue.getJobCountByTypes('waiting', 'active', 'delayed')) === 0 ? true : undefined), 20_000, 'queue drained');
      expect(await records(stack.db).countDocuments({ external_id: 'lost-answer-1' })).to.equal(1);
    } finally {
      await proxy.close();
    }
  });

  it('createRecords: a lost batch answer is retried with the same key, answered with the same ids, and each item stored once', async () => {
    const proxy = await droppingProxy(stack.baseUrl, (n) => n === 1);
    try {
      const lossy = createFeedbackClient({ baseUrl: proxy.url, apiKey: TEST_KEY.secret, retry: { baseDelayMs: 20 } });
      const items = Array.from({ length: 5 }, (_, i) => recordBody({ record: { external_id: `lost-batch-${i}` } }));
      const result = await lossy.createRecords(items);
      expect(proxy.forwarded()).to.equal(2);
      expect(result.accepted).to.equal(5);
      await eventually(async () => ((await records(stack.db).countDocuments({ external_id: { $regex: '^lost-batch-' } })) >= 5 ? true : undefined), 20_000, 'the records');
      await eventually(async () => ((await stack.api.queue.getJobCountByTypes('waiting', 'active', 'delayed')) === 0 ? true : undefined), 20_000, 'queue drained');
      const counts = await countByExternalId(stack, 'lost-batch-');
      expect([...counts.values()]).to.deep.equal([1, 1, 1, 1, 1]);
      const stored = new Set((await records(stack.db).find({ external_id: { $regex: '^lost-batch-' } }, { projection: { _id: 1 } }).toArray()).map((d) => d._id));
      expect(result.items.every((item) => 'result' in item && stored.has(item.result.feedback_record_id))).to.equal(true);
    } finally {
      await proxy.close();
    }
  });

  it("the caller's AbortSignal ends the call, retries included, with code aborted", async () => {
    const proxy = await droppingProxy(stack.baseUrl, () => true);
    try {
      const lossy = createFeedbackClient({ baseUrl: proxy.url, apiKey: TEST_KEY.secret, retry: { baseDelayMs: 50, maxAttempts: 1000 } });
      const controller = new AbortController();
      const call = rejection(lossy.createRecord(recordBody({ record: { external_id: 'aborted-1' } }), { signal: controller.signal }));
      await eventually(async () => (proxy.forwarded() >= 2 ? true : undefined), 10_000, 'two attempts');
      controller.abort();
      const err = await call;
      expect(err.code).to.equal('aborted');
      expect(err.attempts).to.be.at.least(2);
    } finally {
      await proxy.close();
    }
  });
});

describe('createFeedbackClient through a Redis outage', () => {
  let redis: ManagedServer;
  let stack: Stack;
  before(async () => {
    redis = await startRedis({ durable: true });
    // A claim left by an attempt cut off by the outage expires within 2 s (the client retries the 409 meanwhile).
    // A job the worker held when Redis went away stays active in Redis (its completion never
    // reached it) until its lock expires and the stalled check moves it back: up to JOB_LOCK_MS
    // plus two JOB_STALLED_INTERVAL_MS, 90 s at the defaults, longer than this test's waits.
    // Short ones here, so the test is about the client, not about BullMQ's stall timers.
    stack = await startStack(testConfig({ ENQUEUE_TIMEOUT_MS: '300', IDEMPOTENCY_PENDING_TTL_SECONDS: '2', JOB_LOCK_MS: '2000', JOB_STALLED_INTERVAL_MS: '1000' }, { redisUrl: redis.url, mongoUrl: sharedServices().mongoUrl }));
  });
  after(async () => {
    await redis.start().catch(() => undefined);
    await stack?.close();
    await redis?.destroy();
  });

  it('Redis stopped in the middle of a loop of calls and restarted: every call resolves, and each logical write is stored exactly once', async function () {
    this.timeout(120_000);
    const { seen, fetchImpl } = countingFetch();
    const client = createFeedbackClient({ baseUrl: stack.baseUrl, apiKey: TEST_KEY.secret, fetch: fetchImpl, timeoutMs: 90_000, retry: { baseDelayMs: 50, maxDelayMs: 1000, maxAttempts: 1000 } });
    const LOOPS = 3;
    const PER_LOOP = 20;
    let resolved = 0;
    let stopped = false;
    let failedAtStop = 0;
    const outage = (async () => {
      await eventually(async () => (resolved >= 10 ? true : undefined), 30_000, '10 calls before the outage');
      await redis.stop();
      failedAtStop = seen.failed;
      stopped = true;
      // Down until the loops have met it: several attempts refused (503) while it is down.
      await eventually(async () => (seen.failed - failedAtStop >= 6 ? true : undefined), 30_000, 'attempts refused during the outage');
      await redis.start();
    })();
    const loop = async (l: number) => {
      const ids: string[] = [];
      for (let i = 0; i < PER_LOOP; i++) {
        const created = await client.createRecord(recordBody({ record: { external_id: `outage-${l}-${i}` } }));
        resolved++;
        await client.respond({ feedback_record_id: created.feedback_record_id, response: { status: 'submitted', values: { n: i }, user_id: 'annotator-x' } });
        resolved++;
        ids.push(created.feedback_record_id);
      }
      return ids;
    };
    const ids = (await Promise.all(Array.from({ length: LOOPS }, (_, l) => loop(l)))).flat();
    await outage;
    expect(stopped).to.equal(true);
    expect(seen.failed - failedAtStop, 'attempts refused during the outage').to.be.at.least(6);

    const total = LOOPS * PER_LOOP;
    await eventually(async () => ((await records(stack.db).countDocuments({ external_id: { $regex: '^outage-' } })) >= total ? true : undefined), 60_000, 'every record');
    await eventually(async () => ((await responses(stack.db).countDocuments({ feedback_record_id: { $in: ids } })) >= 2 * total ? true : undefined), 60_000, 'every response');
    await eventually(async () => ((await stack.api.queue.getJobCountByTypes('waiting', 'active', 'delayed')) === 0 ? true : undefined), 30_000, 'queue drained');
    const counts = await countByExternalId(stack, 'outage-');
    expect(counts.size).to.equal(total);
    expect([...counts.values()].every((n) => n === 1), JSON.stringify([...counts].filter(([, n]) => n !== 1))).to.equal(true);
    const storedIds = new Set((await records(stack.db).find({ external_id: { $regex: '^outage-' } }, { projection: { _id: 1 } }).toArray()).map((d) => d._id));
    expect(ids.every((id) => storedIds.has(id)), 'the stored records are those the client was told of').to.equal(true);
    expect(await responses(stack.db).countDocuments({ feedback_record_id: { $in: ids } })).to.equal(2 * total);
  });
});
