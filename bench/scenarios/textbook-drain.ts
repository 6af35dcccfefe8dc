// The drain benchmark's textbook pass (issue 21): the same burst queued as the textbook API queues
// it (one job per write), drained by the textbook worker (bench/peers/textbook-worker.ts) into the
// same store, timed from the worker's start to the last job completed.
import { randomBytes } from 'node:crypto';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { COLLECTIONS } from '../../shared/mongo.js';
import { startTextbookWorker, type TextbookJob } from '../peers/textbook-worker.js';
import { startDrainClock } from '../lib/drain-clock.js';
import type { Burst } from '../lib/drain-writes.js';
import type { Monitor } from '../lib/store-monitor.js';

export interface TextbookDrainResult {
  readonly seconds: number;
  readonly rate: number;
  readonly commands: Map<string, number>;
  readonly failedAttempts: number;
  /** CPU of the bench process (where the textbook worker runs) over the drain, µs per write. */
  readonly cpuUsPerWrite: number;
  /** CPU µs per write of the store's processes (PostgreSQL, FerretDB, Redis) over the drain; NaN when not read. */
  readonly storeCpuUsPerWrite: number;
  /** Records and responses the store holds afterwards, and responses whose last version is not the one accepted last (no ordering). */
  readonly verified: string;
}

export async function textbookDrain(spec: { redisUrl: string; mon: Monitor; dbName: string; burst: Burst }): Promise<TextbookDrainResult> {
  const { mon, burst } = spec;
  const queueName = `textbook-drain-${randomBytes(4).toString('hex')}`;
  const producer = new Redis(spec.redisUrl, { maxRetriesPerRequest: null });
  const queue = new Queue<TextbookJob>(queueName, { connection: producer });
  const lastValues = new Map<string, unknown>();
  // Queued as the textbook API does it, one `queue.add` per write; in chunks of addBulk so that queueing is not what the bench waits for.
  const jobs = burst.writes.map((w) => {
    lastValues.set(w.response_id, w.response.values);
    const data: TextbookJob = { feedback_record_id: w.record_id, feedback_response_id: w.response_id, response: w.response, ...(w.kind === 'record' ? { record: w.record } : {}) };
    return { name: w.kind, data };
  });
  for (let i = 0; i < jobs.length; i += 1000) await queue.addBulk(jobs.slice(i, i + 1000));

  const db = mon.client.db(spec.dbName);
  const connection = new Redis(spec.redisUrl, { maxRetriesPerRequest: null });
  let completed = 0;
  let failedAttempts = 0;
  let done!: () => void;
  const allDone = new Promise<void>((res) => (done = res));
  const clock = startDrainClock(mon);
  const worker = startTextbookWorker({ queueName, connection, db, collections: { records: COLLECTIONS.records, responses: COLLECTIONS.responses } });
  worker.on('completed', () => {
    if (++completed === jobs.length) done();
  });
  worker.on('failed', () => {
    failedAttempts++;
    if (++completed === jobs.length) done();
  });
  await allDone;
  const { seconds, cpuUsPerWrite, storeCpuUsPerWrite, commands } = clock.stop(burst.writes.length);
  await worker.close();
  await queue.obliterate({ force: true });
  await queue.close();
  await Promise.all([producer.quit(), connection.quit()]);
  const records = await db.collection(COLLECTIONS.records).countDocuments();
  const stored = await db.collection<{ _id: string; values: unknown }>(COLLECTIONS.responses).find({}, { projection: { values: 1 } }).toArray();
  const byId = new Map(stored.map((d) => [d._id, JSON.stringify(d.values)]));
  let wrong = 0;
  for (const [id, values] of lastValues) if (byId.get(id) !== JSON.stringify(values)) wrong++;
  return { seconds, rate: burst.writes.length / seconds, cpuUsPerWrite, storeCpuUsPerWrite, commands, failedAttempts, verified: `records ${records}, responses ${stored.length}; ${wrong}/${lastValues.size} responses hold a version older than the last accepted (no ordering)` };
}
