import { spawn, type ChildProcess } from 'node:child_process';
import { expect } from 'chai';
import { sharedServices } from '../helpers/root-hooks.js';
import { testConfig } from '../helpers/env.js';
import { startRedis, type ManagedServer } from '../helpers/services.js';
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
});

describe('worker process: SIGTERM mid-drain loses nothing', () => {
  let stack: Stack;
  const children: ChildProcess[] = [];
  before(async () => {
    stack = await startStack(testConfig({ BATCH_MAX_ITEMS: '20' }), { worker: false });
  });
  after(async () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    await stack?.close();
  });

  function spawnWorker(): ChildProcess {
    const c = stack.config;
    const child = spawn(process.execPath, ['--import', 'tsx', 'worker/main.ts'], {
      env: {
        ...process.env,
        REDIS_URL: c.redisUrl,
        MONGODB_URI: c.mongodbUri,
        QUEUE_NAME: c.queueName,
        LOG_LEVEL: process.env['DEBUG_WORKER'] ? 'info' : 'warn',
        WORKER_CONCURRENCY: '2',
        SHUTDOWN_TIMEOUT_MS: '15000',
      },
      stdio: ['ignore', process.env['DEBUG_WORKER'] ? 'inherit' : 'ignore', 'pipe'],
    });
    child.stderr?.resume();
    children.push(child);
    return child;
  }

  it('a worker stopped with SIGTERM while draining exits 0, and a new worker stores every write exactly once', async function () {
    this.timeout(90_000);
    const total = 1500;
    const ids: string[] = [];
    for (let start = 0; start < total; start += 50) {
      const batch = await Promise.all(Array.from({ length: 50 }, (_, i) => stack.post('/feedback-record', recordBody({ record: { external_id: `sig-${start + i}` } }))));
      for (const r of batch) {
        expect(r.status).to.equal(200);
        ids.push(r.body.feedback_record_id as string);
      }
    }
    const first = spawnWorker();
    await eventually(async () => ((await records(stack.db).countDocuments({})) > 0 ? true : undefined), 30_000, 'drain started');
    const exited = new Promise<number | null>((res) => first.once('exit', (code) => res(code)));
    first.kill('SIGTERM');
    expect(await exited).to.equal(0);
    const storedAtStop = await records(stack.db).countDocuments({});
    spawnWorker();
    await eventually(async () => ((await records(stack.db).countDocuments({})) >= total ? true : undefined), 60_000, 'all records');
    await eventually(async () => ((await responses(stack.db).countDocuments({})) >= total ? true : undefined), 30_000, 'all responses');
    expect(await records(stack.db).countDocuments({})).to.equal(total);
    expect(await responses(stack.db).countDocuments({})).to.equal(total);
    const storedIds = new Set((await records(stack.db).find({}, { projection: { _id: 1 } }).toArray()).map((d) => d._id));
    expect(ids.every((id) => storedIds.has(id))).to.equal(true);
    expect(storedAtStop).to.be.lessThan(total, 'SIGTERM came after the drain finished; the test proved nothing');
  });
});
