import { expect } from 'chai';
import { OUTCOME_UNKNOWN_MESSAGE } from '../../api/enqueuer.js';
import { decodeJob } from '../../shared/job-payload.js';
import { spawn } from 'node:child_process';
import { shardOf } from '../../shared/redis-keys.js';
import { startRedisCluster, type RedisClusterHandle } from '../helpers/redis-cluster.js';
import { TEST_KEY, testConfig } from '../helpers/env.js';
import { eventually, recordBody, records, responses, startStack, type Stack } from '../helpers/stack.js';

/** Hash slot of a key (CRC16 of its hash tag), as Redis Cluster computes it. */
async function slotOf(stack: Stack, key: string): Promise<number> {
  return Number(await stack.api.redis.call('CLUSTER', 'KEYSLOT', key));
}

describe('Redis Cluster (3 masters + 3 replicas, real redis-server)', function () {
  // Starting 6 nodes and joining them takes 2-5 s on a loaded machine.
  this.timeout(60_000);
  let cluster: RedisClusterHandle;
  const stacks: Stack[] = [];
  const onCluster = (env: Record<string, string> = {}) =>
    startStack(testConfig({ REDIS_CLUSTER_NODES: cluster.nodesSetting, RATE_LIMIT_PER_MINUTE: '1000', ADMIN_API_KEY_NAMES: TEST_KEY.name, ...env }), { worker: false }).then(async (s) => {
      stacks.push(s);
      // The API starts before its cluster client has read the slot map (it answers 503 until then).
      await eventually(async () => (s.api.redis.status === 'ready' ? true : undefined), 10_000, 'the cluster client ready');
      return s;
    });

  before(async () => {
    cluster = await startRedisCluster();
  });
  after(async () => {
    await Promise.all(stacks.splice(0).map((s) => s.close()));
    await cluster?.destroy();
  });

  it('spreads the shards over the masters; a record and its responses ride in one shard; the worker drains every shard', async () => {
    const stack = await onCluster();
    expect(stack.api.queues.shards).to.have.length(6);
    // Each shard's keys share one slot (BullMQ's scripts need it), and the shards sit on several masters.
    const masters = new Set<number>();
    for (const { shard } of stack.api.queues.shards) {
      const slot = await slotOf(stack, shard.slotKey);
      expect(await slotOf(stack, `${shard.prefix}:${stack.config.queueName}:wait`)).to.equal(slot);
      masters.add((await cluster.masterOf(slot)).port);
    }
    expect(masters.size).to.equal(3);

    const ids: string[] = [];
    for (let i = 0; i < 24; i++) {
      const res = await stack.post('/feedback-record', recordBody({ record: { external_id: `c${i}` } }));
      expect(res.status).to.equal(200);
      ids.push(res.body.feedback_record_id as string);
    }
    for (const id of ids) {
      const res = await stack.post('/feedback-response', { feedback_record_id: id, response: { status: 'draft', values: { n: 1 }, user_id: 'annotator' } });
      expect(res.status).to.equal(200);
    }
    // Before the worker runs: every write sits in the shard of its record id.
    let shardsUsed = 0;
    for (const { shard, queue } of stack.api.queues.shards) {
      const jobs = await queue.getJobs(['waiting']);
      if (jobs.length > 0) shardsUsed++;
      for (const job of jobs) {
        const decoded = decodeJob(job.data);
        if (!decoded.ok) throw new Error(decoded.error);
        for (const w of decoded.writes as { kind: string; record_id: string }[]) expect(shardOf(w.record_id, 6), `${w.kind} of ${w.record_id} in shard ${shard.index}`).to.equal(shard.index);
      }
    }
    expect(shardsUsed).to.be.greaterThan(1);
    const readyz = await stack.request('/readyz', { method: 'GET' });
    expect(readyz.status).to.equal(200);
    // Queue depth is summed over the shards: 48 writes, at least one job each unless batched.
    const metrics = await stack.request('/metrics', { method: 'GET' });
    const waiting = Number(/feedback_api_queue_jobs\{state="waiting"\} (\d+)/.exec(metrics.text)?.[1]);
    const total = await stack.api.queues.count('waiting');
    expect(waiting).to.equal(total);
    expect(total).to.be.greaterThan(0);
    // The dashboard lists one queue per shard, each with its own jobs.
    const board = await stack.request('/admin/queues/api/queues?status=waiting', { method: 'GET', headers: { Authorization: `Bearer ${TEST_KEY.secret}` } });
    expect(board.status).to.equal(200);
    const listed = board.body.queues as { name: string }[];
    expect(listed.map((q) => q.name).sort()).to.deep.equal([0, 1, 2, 3, 4, 5].map((i) => `shard-${i}-${stack.config.queueName}`));

    await stack.startWorker();
    expect(stack.worker!.workers).to.have.length(6);
    await eventually(async () => ((await responses(stack.db).countDocuments({ user_id: 'annotator' })) === 24 ? true : undefined), 30_000, 'every response stored');
    expect(await records(stack.db).countDocuments({})).to.equal(24);
    // A job is marked completed a moment after its writes are stored: wait for that, then none failed.
    await eventually(async () => ((await stack.api.queues.count('waiting', 'active', 'delayed')) === 0 ? true : undefined), 30_000, 'every shard drained');
    expect(await stack.api.queues.count('failed')).to.equal(0);
  });

  it('keeps idempotency keys and rate limits working on the cluster', async () => {
    const stack = await onCluster({ RATE_LIMIT_PER_MINUTE: '3' });
    const first = await stack.post('/feedback-record', recordBody(), { 'Idempotency-Key': 'cluster-key' });
    const replay = await stack.post('/feedback-record', recordBody(), { 'Idempotency-Key': 'cluster-key' });
    expect([first.status, replay.status]).to.deep.equal([200, 200]);
    expect(replay.headers.get('Idempotent-Replayed')).to.equal('true');
    expect(replay.body).to.deep.equal(first.body);
    const reused = await stack.post('/feedback-record', recordBody({ record: { external_id: 'other' } }), { 'Idempotency-Key': 'cluster-key' });
    expect(reused.status).to.equal(409);
    const limited = await stack.post('/feedback-record', recordBody());
    expect(limited.status).to.equal(429);
    expect(limited.body.error.code).to.equal('rate_limited');
  });

  it('REDIS_MIN_REPLICAS_ACK: 200 once the shard master\'s replica confirmed the job; more replicas than exist is 503 "outcome unknown"', async () => {
    const one = await onCluster({ REDIS_MIN_REPLICAS_ACK: '1' });
    const ok = await one.post('/feedback-record', recordBody());
    expect(ok.status).to.equal(200);
    // Each master has one replica: WAIT 2 can only time out, and the job is on the master anyway.
    const two = await onCluster({ REDIS_MIN_REPLICAS_ACK: '2', REDIS_REPLICA_ACK_TIMEOUT_MS: '100' });
    const refused = await two.post('/feedback-record', recordBody());
    expect(refused.status).to.equal(503);
    expect(refused.body.error.code).to.equal('queue_unavailable');
    expect(refused.body.error.message).to.equal(OUTCOME_UNKNOWN_MESSAGE);
    expect(refused.headers.get('Retry-After')).to.equal('1');
  });

  it('a process whose cluster client quit while refreshing its slot map exits on its own (no timer left behind)', async () => {
    // The child opens a client as the API and the worker do, quits while a periodic slot-map
    // refresh is in flight, and must then exit with nothing left to wait for.
    const script = [
      "import { loadConfig } from './shared/config.ts';",
      "import { createLogger } from './shared/logger.ts';",
      "import { createRedis } from './shared/redis.ts';",
      `const redis = createRedis(loadConfig({ REDIS_CLUSTER_NODES: ${JSON.stringify(cluster.nodesSetting)} }), 'worker', createLogger({ level: 'silent', name: 'child' }));`,
      "await new Promise((resolve) => redis.once('ready', resolve));",
      // Quit while a periodic round (the one ioredis's timer starts, with its callback) is in flight.
      'const refresh = redis.refreshSlotsCache.bind(redis);',
      'let quit;',
      'const quitting = new Promise((resolve) => { redis.refreshSlotsCache = (callback) => { refresh(callback); if (callback && quit === undefined) resolve((quit = redis.quit())); }; });',
      'await quitting;',
    ].join('\n');
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    const code = await Promise.race([exited, new Promise<'running'>((r) => setTimeout(() => r('running'), 15_000))]);
    if (code === 'running') child.kill('SIGKILL');
    expect(code, `the child is still running 15 s after its client quit ${stderr}`).to.equal(0);
  });
});
