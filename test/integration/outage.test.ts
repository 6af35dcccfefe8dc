import { spawn, type ChildProcess } from 'node:child_process';
import { expect } from 'chai';
import { Redis } from 'ioredis';
import { sharedServices } from '../helpers/root-hooks.js';
import { testConfig } from '../helpers/env.js';
import { startFerretDb, startRedis, type ManagedServer } from '../../devkit/servers.js';
import { eventually, recordBody, records, responses, startStack, type Stack } from '../helpers/stack.js';

describe('Redis outage (API answers 503 and recovers without restart)', () => {
  let redis: ManagedServer;
  let stack: Stack;
  before(async () => {
    redis = await startRedis({ durable: true });
    stack = await startStack(testConfig({ ENQUEUE_TIMEOUT_MS: '500' }, { redisUrl: redis.url, mongoUrl: sharedServices().mongoUrl }));
  });
  after(async () => {
    await redis.start().catch(() => undefined);
    await stack?.close();
    await redis?.destroy();
  });

  it('answers 503 queue_unavailable with Retry-After while Redis is down, and 200 again once it is back', async () => {
    const before = await stack.post('/feedback-record', recordBody({ record: { external_id: 'before-outage' } }));
    expect(before.status).to.equal(200);
    await redis.stop();

    const during = await stack.post('/feedback-record', recordBody({ record: { external_id: 'during-outage' } }));
    expect(during.status).to.equal(503);
    expect(during.body.error.code).to.equal('queue_unavailable');
    expect(during.headers.get('retry-after')).to.match(/^\d+$/);
    expect(during.headers.get('x-request-id')).to.be.a('string');
    const ready = await stack.request('/readyz', { method: 'GET' });
    expect(ready.status).to.equal(503);

    await redis.start();
    const after = await eventually(async () => {
      const res = await stack.post('/feedback-record', recordBody({ record: { external_id: 'after-outage' } }));
      return res.status === 200 ? res : undefined;
    }, 20_000, 'a 200 after Redis came back');
    await eventually(async () => ((await stack.request('/readyz', { method: 'GET' })).status === 200 ? true : undefined), 10_000, 'ready');
    // The worker recovered by itself too: both acknowledged writes reach MongoDB.
    await eventually(() => records(stack.db).findOne({ _id: after.body.feedback_record_id }).then((d) => d ?? undefined), 20_000, 'record after outage');
    await eventually(() => records(stack.db).findOne({ _id: before.body.feedback_record_id }).then((d) => d ?? undefined), 20_000, 'record before outage');
    expect(await records(stack.db).countDocuments({ external_id: 'during-outage' })).to.equal(0);
  });

  it('a claim of an Idempotency-Key that Redis answered too late is released: the retry runs once Redis is back, not 409 for IDEMPOTENCY_PENDING_TTL_SECONDS', async () => {
    const admin = new Redis(redis.url, { lazyConnect: true });
    await admin.connect();
    try {
      const body = recordBody({ record: { external_id: 'claim-timed-out' } });
      const headers = { 'Idempotency-Key': 'claim-timed-out-1' };
      // Writes stall for 1.5 s, longer than ENQUEUE_TIMEOUT_MS (500): the claim's SET times out
      // here and lands in Redis once the pause ends.
      await admin.call('CLIENT', 'PAUSE', '1500', 'WRITE');
      const first = await stack.post('/feedback-record', body, headers);
      expect(first.status).to.equal(503);
      expect(first.body.error.code).to.equal('queue_unavailable');
      expect(first.body.error.message).to.match(/^the write was not queued/);
      // No request holds the key now: a retry gets through once Redis writes again (the pending
      // claim would otherwise answer 409 idempotency_key_in_use for 60 s).
      const answers: number[] = [];
      const ok = await eventually(async () => {
        const res = await stack.post('/feedback-record', body, headers);
        answers.push(res.status);
        return res.status === 200 ? res : undefined;
      }, 10_000, 'a 200 for the retry with the same Idempotency-Key');
      expect(answers.filter((s) => s === 409)).to.deep.equal([]);
      const replay = await stack.post('/feedback-record', body, headers);
      expect(replay.status).to.equal(200);
      expect(replay.body).to.deep.equal(ok.body);
      await eventually(() => records(stack.db).findOne({ _id: ok.body.feedback_record_id }).then((d) => d ?? undefined), 20_000, 'the record');
      expect(await records(stack.db).countDocuments({ external_id: 'claim-timed-out' })).to.equal(1);
    } finally {
      admin.disconnect();
    }
  });
});

describe('worker process: SIGTERM mid-drain loses nothing', () => {
  // A store of its own, paused while the worker holds jobs: the SIGTERM then lands mid-drain
  // however fast the store is.
  let store: ManagedServer;
  let stack: Stack;
  const children: ChildProcess[] = [];
  before(async () => {
    store = await startFerretDb();
    stack = await startStack(testConfig({ BATCH_MAX_ITEMS: '20' }, { redisUrl: sharedServices().redisUrl, mongoUrl: store.url }), { worker: false });
  });
  after(async () => {
    store?.resume();
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    await stack?.close();
    await store?.destroy();
  });

  /** The worker as the Procfile runs it; `lines` collects its log lines. */
  function spawnWorker(): { child: ChildProcess; lines: string[] } {
    const c = stack.config;
    const child = spawn(process.execPath, ['--import', 'tsx', 'worker/main.ts'], {
      env: {
        ...process.env,
        REDIS_URL: c.redisUrl,
        MONGODB_URI: c.mongodbUri,
        QUEUE_NAME: c.queueName,
        LOG_LEVEL: 'info',
        WORKER_CONCURRENCY: '2',
        SHUTDOWN_TIMEOUT_MS: '15000',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const lines: string[] = [];
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      if (process.env['DEBUG_WORKER']) process.stdout.write(chunk);
      lines.push(...chunk.split('\n'));
    });
    child.stderr?.resume();
    children.push(child);
    return { child, lines };
  }

  async function postRecords(count: number, prefix: string, ids: string[]): Promise<void> {
    for (let start = 0; start < count; start += 50) {
      const batch = await Promise.all(Array.from({ length: 50 }, (_, i) => stack.post('/feedback-record', recordBody({ record: { external_id: `${prefix}-${start + i}` } }))));
      for (const r of batch) {
        expect(r.status).to.equal(200);
        ids.push(r.body.feedback_record_id as string);
      }
    }
  }

  it('a worker stopped with SIGTERM while draining exits 0, and a new worker stores every write exactly once', async function () {
    this.timeout(90_000);
    const ids: string[] = [];
    await postRecords(300, 'sig-before', ids);
    const first = spawnWorker();
    await eventually(async () => ((await records(stack.db).countDocuments({})) > 0 ? true : undefined), 30_000, 'drain started');
    store.pause();
    // Accepted without the store; whatever the drain had done, these jobs are still to come.
    await postRecords(200, 'sig-paused', ids);
    await eventually(async () => {
      const counts = await stack.api.queue.getJobCounts('active', 'waiting');
      return (counts['active'] ?? 0) >= 1 && (counts['waiting'] ?? 0) >= 1 ? true : undefined;
    }, 10_000, 'the worker holding jobs it cannot finish, with more waiting');
    const exited = new Promise<number | null>((res) => first.child.once('exit', (code) => res(code)));
    first.child.kill('SIGTERM');
    await eventually(async () => (first.lines.some((l) => l.includes('"msg":"shutting down"')) ? true : undefined), 10_000, 'the worker to start shutting down');
    store.resume();
    expect(await exited).to.equal(0);
    expect(await stack.api.queue.getJobCountByTypes('waiting'), 'the stopped worker took no job after SIGTERM').to.be.greaterThan(0);
    const storedAtStop = await records(stack.db).countDocuments({});
    expect(storedAtStop).to.be.lessThan(ids.length);

    spawnWorker();
    await eventually(async () => ((await records(stack.db).countDocuments({})) >= ids.length ? true : undefined), 60_000, 'all records');
    await eventually(async () => ((await responses(stack.db).countDocuments({})) >= ids.length ? true : undefined), 30_000, 'all responses');
    expect(await records(stack.db).countDocuments({})).to.equal(ids.length);
    expect(await responses(stack.db).countDocuments({})).to.equal(ids.length);
    const storedIds = new Set((await records(stack.db).find({}, { projection: { _id: 1 } }).toArray()).map((d) => d._id));
    expect(ids.every((id) => storedIds.has(id))).to.equal(true);
  });
});
