import { expect } from 'chai';
import { createBatchingEnqueuer } from '../../api/enqueuer.js';
import { createApiMetrics } from '../../api/metrics.js';
import { AppError } from '../../shared/errors.js';
import { createLogger } from '../../shared/logger.js';
import { createOrderClock } from '../../shared/order-clock.js';
import type { WriteQueue, WriteQueues } from '../../shared/queue.js';
import type { Write } from '../../shared/writes.js';

const write = (n: number): Write => ({
  kind: 'response',
  request_id: `r${n}`,
  accepted_at: 0,
  api_key: 'k',
  record_id: 'rec',
  response_id: `rsp${n}`,
  response: { status: 'draft', values: { n }, user_id: 'u' },
});

/** Stands in for BullMQ's queue.add only: the enqueuer's own logic is under test (no Redis here). */
function fakeQueue(hold: Promise<void>) {
  const jobs: { writes: Write[] }[] = [];
  const queue = {
    async add(_name: string, data: { writes: Write[] }) {
      jobs.push(data);
      await hold;
      return { id: String(jobs.length) };
    },
  } as unknown as WriteQueue;
  return { queue, jobs };
}

function enqueuer(queue: WriteQueue, limits: { maxPendingWrites?: number; maxPendingBytes?: number; timeoutMs?: number } = {}) {
  const only = { shard: { index: 0, prefix: 'bull', label: 'q', slotKey: 'bull:q:id' }, queue };
  return createBatchingEnqueuer({
    queues: { shards: [only], forRecord: () => only } as unknown as WriteQueues,
    logger: createLogger({ level: 'silent', name: 'test' }),
    metrics: createApiMetrics({ defaultMetrics: false }),
    clock: createOrderClock(),
    maxItems: 100,
    maxBytes: 1 << 20,
    maxInFlight: 1,
    maxPendingWrites: limits.maxPendingWrites ?? 1000,
    maxPendingBytes: limits.maxPendingBytes ?? 1 << 30,
    timeoutMs: limits.timeoutMs ?? 60_000,
    retryAfterSeconds: 1,
    compression: 'none',
  });
}

const codeOf = (p: Promise<unknown>) => p.then(() => 'ok', (e: unknown) => (e instanceof AppError ? e.code : String(e)));

describe('enqueuer (group commit of writes into jobs)', () => {
  it('gives each write an acceptance order, increasing in the order of enqueue(), carried in the job', async () => {
    const { queue, jobs } = fakeQueue(Promise.resolve());
    const e = enqueuer(queue);
    const receipts = await Promise.all([1, 2, 3].map((n) => e.enqueue(write(n), 10)));
    expect(receipts[0]!.seq).to.be.lessThan(receipts[1]!.seq);
    expect(receipts[1]!.seq).to.be.lessThan(receipts[2]!.seq);
    expect(jobs.flatMap((j) => j.writes.map((w) => w.seq))).to.deep.equal(receipts.map((r) => r.seq));
  });

  it('answers overloaded at once when too many writes, or bytes, wait for a job', async () => {
    let release!: () => void;
    const { queue } = fakeQueue(new Promise((r) => (release = r)));
    const e = enqueuer(queue, { maxPendingWrites: 2, maxPendingBytes: 100 });
    const inFlight = e.enqueue(write(0), 10);
    await new Promise((r) => setImmediate(r));
    const waiting = [e.enqueue(write(1), 10), e.enqueue(write(2), 10)];
    expect(await codeOf(e.enqueue(write(3), 10))).to.equal('overloaded');
    release();
    expect(await Promise.all([inFlight, ...waiting].map(codeOf))).to.deep.equal(['ok', 'ok', 'ok']);
    const bytes = enqueuer(fakeQueue(new Promise(() => undefined)).queue, { maxPendingBytes: 100 });
    void bytes.enqueue(write(0), 10);
    await new Promise((r) => setImmediate(r));
    void bytes.enqueue(write(1), 60);
    expect(await codeOf(bytes.enqueue(write(2), 60))).to.equal('overloaded');
  });

  it('answers queue_unavailable to a write that waited past its deadline, and never sends it', async () => {
    const { queue, jobs } = fakeQueue(new Promise(() => undefined));
    const e = enqueuer(queue, { timeoutMs: 40 });
    void e.enqueue(write(0), 10);
    await new Promise((r) => setImmediate(r));
    expect(await codeOf(e.enqueue(write(1), 10))).to.equal('queue_unavailable');
    expect(jobs).to.have.length(1);
  });
});
