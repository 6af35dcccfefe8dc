import { expect } from 'chai';
import { createBatchingEnqueuer } from '../../api/enqueuer.js';
import { createApiMetrics } from '../../api/metrics.js';
import { createShardHealth } from '../../api/shard-health.js';
import { shardDescription } from '../../api/dashboard.js';
import { AppError } from '../../shared/errors.js';
import { createLogger } from '../../shared/logger.js';
import { createOrderClock } from '../../shared/order-clock.js';
import type { WriteQueue, WriteQueues } from '../../shared/queue.js';
import { writeTargetId, type Write } from '../../shared/writes.js';

/*
 * The routing of writes around a queue shard that stops answering (issue 26), as pure logic:
 * fake queues stand in for BullMQ's queue.add (the cluster fault scenario runs the real thing,
 * test/faults/redis-cluster.test.ts). Record ids name their shard by their first letter here.
 */

const base = { request_id: 'r', accepted_at: 0, api_key: 'k' } as const;
const response = (recordId: string, n: number): Write => ({ ...base, kind: 'response', record_id: recordId, response_id: `rsp-${recordId}-${n}`, response: { status: 'draft', values: { n }, user_id: 'u' } });
const record = (recordId: string): Write => ({
  ...base,
  kind: 'record',
  record_id: recordId,
  response_id: `rsp-${recordId}`,
  record: { feedback_dataset_id: 'd', field_to_value: { q: 1 } },
  response: { status: 'submitted', values: { a: 1 }, user_id: 'u' },
});

type Behaviour = 'ok' | 'refuse' | 'hang';

function shardQueues(n: number) {
  const behaviour: Behaviour[] = Array.from({ length: n }, () => 'ok');
  const jobs: Write[][][] = Array.from({ length: n }, () => []);
  const adds: number[] = Array.from({ length: n }, () => 0);
  const shards = Array.from({ length: n }, (_, index) => ({
    shard: { index, prefix: `s${index}`, label: `s${index}`, slotKey: `s${index}:q:id` },
    queue: {
      async add(_name: string, data: { writes: Write[] }) {
        adds[index]!++;
        if (behaviour[index] === 'refuse') throw new Error('CLUSTERDOWN The cluster is down');
        if (behaviour[index] === 'hang') await new Promise(() => undefined);
        jobs[index]!.push(data.writes);
        return { id: String(jobs[index]!.length) };
      },
    } as unknown as WriteQueue,
  }));
  const shardOfId = (id: string) => Number(id.slice(1, 2)) % n;
  const queues = { shards, forRecord: (id: string) => shards[shardOfId(id)]! } as unknown as WriteQueues;
  return { queues, behaviour, jobs, adds };
}

function setUp(n: number, options: { reroute?: boolean; probe?: () => Promise<boolean> } = {}) {
  const q = shardQueues(n);
  const health = createShardHealth({ shards: n, probe: options.probe ?? (() => Promise.resolve(false)), probeMs: 10 });
  const enqueuer = createBatchingEnqueuer({
    queues: q.queues,
    ...(options.reroute === false ? {} : { health }),
    logger: createLogger({ level: 'silent', name: 'test' }),
    metrics: createApiMetrics({ defaultMetrics: false }),
    clock: createOrderClock(),
    maxItems: 100,
    maxBytes: 1 << 20,
    maxInFlight: 1,
    maxPendingWrites: 1000,
    maxPendingBytes: 1 << 30,
    timeoutMs: 200,
    retryAfterSeconds: 1,
    compression: 'none',
  });
  return { ...q, health, enqueuer };
}

const codeOf = (p: Promise<unknown>) => p.then(() => 'ok', (e: unknown) => (e instanceof AppError ? e.code : String(e)));

describe('shard rerouting (SHARD_REROUTE)', () => {
  it('a shard that refuses (CLUSTERDOWN): the job that was never queued moves, later writes avoid the shard, a new record gets an id on a live shard', async () => {
    const t = setUp(3);
    t.behaviour[0] = 'refuse';
    let minted = 0;
    const remint = () => record(`r${++minted}-x`);
    // Its home shard refuses: moved with a new id (r1 → shard 1), and answered with that id.
    const first = await t.enqueuer.enqueue(record('r0-a'), 10, { remint });
    expect(first.write.record_id).to.equal('r1-x');
    expect(t.health.healthy(0)).to.equal(false);
    // A response to a record of shard 0 goes to the next live shard; nothing is lost.
    const resp = await t.enqueuer.enqueue(response('r0-a', 1), 10);
    expect(resp.write.record_id).to.equal('r0-a');
    expect(t.jobs[0]).to.deep.equal([]);
    expect(t.jobs[1]!.flat().map((w) => w.record_id)).to.deep.equal(['r1-x', 'r0-a']);
    t.health.close();
  });

  it('a record whose id is fixed (no remint: an Idempotency-Key, a batch) stays on its shard and gets 503 there', async () => {
    const t = setUp(3);
    t.behaviour[0] = 'refuse';
    expect(await codeOf(t.enqueuer.enqueue(record('r0-a'), 10))).to.equal('queue_unavailable');
    expect(t.jobs.flat()).to.deep.equal([]);
    t.health.close();
  });

  it('without rerouting every write goes to its record\'s shard (the mutation the fault scenario shows)', async () => {
    const t = setUp(3, { reroute: false });
    t.behaviour[0] = 'refuse';
    expect(await codeOf(t.enqueuer.enqueue(record('r0-a'), 10, { remint: () => record('r1-x') }))).to.equal('queue_unavailable');
    expect(await codeOf(t.enqueuer.enqueue(response('r0-a', 1), 10))).to.equal('queue_unavailable');
    t.health.close();
  });

  it('when every shard refuses, a write is answered 503 after a bounded number of moves (no loop)', async () => {
    const t = setUp(3);
    t.behaviour.fill('refuse');
    expect(await codeOf(t.enqueuer.enqueue(response('r0-a', 1), 10))).to.equal('queue_unavailable');
    expect(t.adds.reduce((a, b) => a + b, 0)).to.be.within(1, 3);
    t.health.close();
  });

  it('a shard that hangs: the writes sent there are 503 "may or may not", the writes waiting behind them move', async () => {
    const t = setUp(2);
    t.behaviour[0] = 'hang';
    const sent = t.enqueuer.enqueue(response('r0-a', 1), 10); // in flight (maxInFlight 1)
    // 50 ms later: its own deadline (timeoutMs, 200 ms) comes 50 ms after the hung add's. Queued at
    // once, both deadlines fall in the same millisecond and either timer may fire first (CI saw
    // the waiting write expire before the hung add timed out, 2026-11-26).
    await new Promise((r) => setTimeout(r, 50));
    const waiting = t.enqueuer.enqueue(response('r0-a', 2), 10); // waits behind it
    expect(await codeOf(sent)).to.equal('queue_unavailable');
    const moved = await waiting;
    expect(writeTargetId(moved.write)).to.equal('rsp-r0-a-2');
    expect(t.jobs[1]!.flat().map(writeTargetId)).to.deep.equal(['rsp-r0-a-2']);
    t.health.close();
  });

  it('a shard that is down is probed and used again once the probe answers', async () => {
    let answers = false;
    const t = setUp(2, { probe: () => Promise.resolve(answers) });
    t.health.reportFailure(0, 'test');
    expect(t.health.healthy(0)).to.equal(false);
    // A job acknowledged while the probe has not answered does not bring it back.
    t.health.reportSuccess(0);
    expect(t.health.healthy(0)).to.equal(false);
    answers = true;
    for (let i = 0; i < 100 && !t.health.healthy(0); i++) await new Promise((r) => setTimeout(r, 10));
    expect(t.health.healthy(0)).to.equal(true);
    expect((await t.enqueuer.enqueue(response('r0-b', 1), 10)).write.record_id).to.equal('r0-b');
    expect(t.jobs[0]!.flat()).to.have.length(1);
    t.health.close();
  });

  it('nextHealthy goes round the ring and says when no shard answers', () => {
    const h = createShardHealth({ shards: 3, probe: () => Promise.resolve(false), probeMs: 1000 });
    h.reportFailure(1, 'x');
    expect(h.nextHealthy(0)).to.equal(2);
    expect(h.nextHealthy(2)).to.equal(0);
    h.reportFailure(0, 'x');
    h.reportFailure(2, 'x');
    expect(h.nextHealthy(0)).to.equal(undefined);
    expect(h.states()).to.deep.equal(['down', 'down', 'down']);
    h.close();
  });

  it('the dashboard says which shard this process routes around', () => {
    const shard = { index: 2, prefix: '{fi:2}' };
    expect(shardDescription(shard, true, true)).to.equal('writes of shard 2 (Redis prefix {fi:2}), waiting for the worker');
    expect(shardDescription(shard, true, false)).to.match(/^writes of shard 2 .*NOT ANSWERING/);
  });
});
