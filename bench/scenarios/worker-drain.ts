// The drain benchmark's worker pass: a burst queued as the API queues it, drained by the service's
// own worker, timed, and checked in the store.
import { randomBytes } from 'node:crypto';
import type { Db } from 'mongodb';
import { loadConfig, type Config } from '../../shared/config.js';
import { encodeJob } from '../../shared/job-payload.js';
import { createLogger } from '../../shared/logger.js';
import { COLLECTIONS } from '../../shared/mongo.js';
import { createWriteQueues, WRITE_JOB_NAME } from '../../shared/queue.js';
import { createRedis } from '../../shared/redis.js';
import type { ResponseDoc } from '../../shared/documents.js';
import type { JobSummary } from '../../worker/processor.js';
import { startWorker } from '../../worker/runtime.js';
import { newWebhookSecret, type WebhookEndpointDoc } from '../../shared/webhook-admin.js';
import { WEBHOOK_EVENT_TYPES } from '../../shared/webhook-events.js';
import { startDrainClock } from '../lib/drain-clock.js';
import type { Burst, Seed } from '../lib/drain-writes.js';
import { progress } from '../lib/runner.js';
import type { Monitor } from '../lib/store-monitor.js';

/** Writes per queued job, as the API's group commit closes them at BATCH_MAX_ITEMS. */
/** Writes per queued job unless `--job-writes` says otherwise (bench/drain.ts). */
export const JOB_WRITES = 200;

export interface DrainResult {
  readonly seconds: number;
  readonly rate: number;
  readonly commands: Map<string, number>;
  /** Store seconds by command name (summed over concurrent commands). */
  readonly storeSeconds: Map<string, number>;
  readonly summary: JobSummary;
  readonly failedAttempts: number;
  readonly verified: string;
  /** CPU of the bench process (where the worker runs) over the drain, µs per write: user + system, all threads. */
  readonly cpuUsPerWrite: number;
  /** CPU µs per write of the store's processes (PostgreSQL, FerretDB, Redis) over the drain; NaN when not read. */
  readonly storeCpuUsPerWrite: number;
}

/**
 * Queues the burst as the API does (deflated jobs of 200 writes on the write queue) with no worker
 * running, then starts the worker (worker/runtime.ts `startWorker`, on a MongoClient of ours so
 * that its store commands can be counted) and times until every job has completed, from the call
 * that starts it (its index check included).
 */
export async function drainBurst(spec: { redisUrl: string; storeUrl: string; mon: Monitor; dbName: string; burst: Burst; seed: Seed; jobWrites?: number; webhookUrl?: string; env?: Readonly<Record<string, string>>; afterDrain?: () => Promise<void> }): Promise<DrainResult> {
  const { mon, burst } = spec;
  const jobWrites = spec.jobWrites ?? JOB_WRITES;
  const queueName = `drain-${randomBytes(4).toString('hex')}`;
  const config: Config = loadConfig({ REDIS_URL: spec.redisUrl, MONGODB_URI: `${spec.storeUrl}/${spec.dbName}`, QUEUE_NAME: queueName, LOG_LEVEL: 'warn', ...(spec.webhookUrl === undefined ? {} : { WEBHOOKS_ALLOW_INSECURE: 'true' }), ...(process.env['WORKER_CONCURRENCY'] === undefined ? {} : { WORKER_CONCURRENCY: process.env['WORKER_CONCURRENCY'] }), ...spec.env });
  const logger = createLogger({ level: 'warn', name: 'bench-drain-worker', destination: process.stderr });
  const producer = createRedis(config, 'producer', logger);
  // One shard (QUEUE_SHARDS defaults to 1 on one Redis): the worker drains what this queue holds.
  const queue = createWriteQueues(config, producer).shards[0]!.queue;
  let jobs = 0;
  for (let i = 0; i < burst.writes.length; i += jobWrites) {
    await queue.add(WRITE_JOB_NAME, await encodeJob(burst.writes.slice(i, i + jobWrites), config.queueCompression));
    jobs++;
  }

  const db = mon.client.db(spec.dbName);
  if (spec.webhookUrl !== undefined) {
    // One endpoint subscribed to every event of every dataset (bench/webhooks.ts), in place before the worker starts.
    await db.collection<WebhookEndpointDoc>(COLLECTIONS.webhookEndpoints).insertOne({ _id: 'wh_bench', url: spec.webhookUrl, events: [...WEBHOOK_EVENT_TYPES], datasets: null, description: null, secret: newWebhookSecret(), created_at: new Date() });
  }
  const summary = { records: 0, responses: 0, suggestions: 0, stale: 0, dead_lettered: 0 };
  let completed = 0;
  let failedAttempts = 0;
  let done!: () => void;
  const allDone = new Promise<void>((res) => (done = res));
  const clock = startDrainClock(mon);
  const runtime = await startWorker(config, logger, { mongo: { client: mon.client, db, close: async () => undefined }, defaultMetrics: false });
  const worker = runtime.worker;
  worker.on('completed', (_job, r: JobSummary) => {
    summary.records += r.records;
    summary.responses += r.responses;
    summary.suggestions += r.suggestions;
    summary.stale += r.stale;
    summary.dead_lettered += r.dead_lettered;
    if (++completed === jobs) done();
  });
  worker.on('failed', (job, err) => {
    failedAttempts++;
    progress(`job ${job?.id ?? '?'} attempt failed: ${err.message}`);
  });
  await allDone;
  const { seconds, cpuUsPerWrite, storeCpuUsPerWrite, commands } = clock.stop(burst.writes.length);
  const storeSeconds = mon.lastSeconds();
  const counts = await queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized', 'failed');
  // With the worker still running (bench/webhooks.ts: until every event is delivered).
  await spec.afterDrain?.();
  await runtime.close();
  await queue.close();
  await producer.quit();
  const verified = await verifyStored(db, spec.seed, burst);
  const left = Object.values(counts).reduce((a, b) => a + b, 0);
  return { seconds, rate: burst.writes.length / seconds, cpuUsPerWrite, storeCpuUsPerWrite, commands, storeSeconds, summary, failedAttempts, verified: left === 0 ? verified : `${verified}; queue still holds ${JSON.stringify(counts)}` };
}

/** Counts in the store, and every response touched holds the expected final seq. */
export async function verifyStored(db: Db, seed: Seed, burst: Burst): Promise<string> {
  const records = await db.collection(COLLECTIONS.records).countDocuments();
  const stored = await db.collection<ResponseDoc>(COLLECTIONS.responses).find({}, { projection: { seq: 1 } }).toArray();
  const expectRecords = seed.records.length + burst.newRecords;
  const expectResponses = seed.responses.length + burst.newRecords;
  const seqOf = new Map(stored.map((d) => [d._id, d.seq]));
  let wrong = 0;
  for (const [id, seq] of burst.finalSeq) if (seqOf.get(id) !== seq) wrong++;
  const ok = records === expectRecords && stored.length === expectResponses && wrong === 0;
  const text = `records ${records}/${expectRecords}, responses ${stored.length}/${expectResponses}, wrong final seq ${wrong}/${burst.finalSeq.size}`;
  if (!ok) progress(`VERIFY FAILED: ${text}`);
  return ok ? `ok (${text})` : `FAILED (${text})`;
}
