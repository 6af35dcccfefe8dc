import { expect } from 'chai';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { MongoClient, type Db } from 'mongodb';
import { mongoClientOptions } from '../../shared/mongo.js';
import { JOB_PAYLOAD_VERSION } from '../../shared/job-payload.js';
import { WRITE_JOB_NAME } from '../../shared/queue.js';
import type { SequencedWrite } from '../../worker/documents.js';
import { ensureIndexes } from '../../worker/indexes.js';
import { msg, saveLogs, spawnService, type ServiceProcess } from '../../devkit/processes.js';
import { startDelayProxy, type DelayProxy } from './delay-proxy.js';
import { uniqueName } from './env.js';
import { sharedServices } from './root-hooks.js';
import { eventually } from './stack.js';

/*
 * The harness of the tests in which several worker processes race on the same documents
 * (writer-races, completion): a database and a paused queue of their own, jobs of one to three
 * writes in a given order, worker processes whose store connections go through a proxy that
 * holds every command and reply for a random time.
 */

export interface RacingWorkers {
  /** The test's database, indexes made. */
  readonly db: Db;
  /** Queues `order` as jobs of 1–3 writes (sizes drawn from the seed), while the queue is paused. */
  enqueue(order: readonly SequencedWrite[]): Promise<void>;
  /**
   * Starts `workers` worker processes through the delay proxy, resumes the queue, waits until
   * every job completed (none failed), and checks that every process stored some of them.
   */
  run(options: { readonly workers: number; readonly maxDelayMs: number; readonly random?: () => number; readonly env?: Readonly<Record<string, string>>; readonly timeoutMs: number }): Promise<void>;
  /** Stops everything; keeps the processes' logs under `label` when the test failed. */
  close(failed: boolean): Promise<void>;
}

export async function startRacingWorkers(label: string, seed: number): Promise<RacingWorkers> {
  const { redisUrl, mongoUrl } = sharedServices();
  const database = uniqueName(label).replace(/-/g, '_');
  const queueName = uniqueName(label);
  const client = new MongoClient(mongoUrl, mongoClientOptions());
  const db = client.db(database);
  await ensureIndexes(db);
  const connection = new Redis(redisUrl, { maxRetriesPerRequest: null });
  const queue = new Queue(queueName, { connection });
  // Paused until every worker process takes jobs, so that none drains the queue alone.
  await queue.pause();
  const workers: ServiceProcess[] = [];
  let proxy: DelayProxy | undefined;
  let jobs = 0;

  return {
    db,
    async enqueue(order) {
      for (let i = 0; i < order.length; jobs++) {
        const size = 1 + ((i * 7 + seed) % 3);
        const writes = order.slice(i, i + size).map((item) => ({ ...item.write, seq: item.seq }));
        await queue.add(WRITE_JOB_NAME, { v: JOB_PAYLOAD_VERSION, writes } as never, { attempts: 5 });
        i += size;
      }
    },
    async run(options) {
      proxy = await startDelayProxy(Number(new URL(mongoUrl).port), options.maxDelayMs, options.random);
      const env = {
        NODE_ENV: 'test',
        REDIS_URL: redisUrl,
        MONGODB_URI: `mongodb://127.0.0.1:${proxy.port}/${database}`,
        QUEUE_NAME: queueName,
        LOG_LEVEL: 'info',
        ...options.env,
      };
      for (let k = 0; k < options.workers; k++) workers.push(spawnService(`worker-${k}`, 'worker/main.ts', env));
      await Promise.all(workers.map((w) => w.waitForLog(msg('worker started'), 60_000, 'worker started')));
      await queue.resume();
      await eventually(
        async () => {
          const counts = await queue.getJobCounts('completed', 'failed');
          if ((counts['failed'] ?? 0) > 0) throw new Error(`${counts['failed']} job(s) failed`);
          return counts['completed'] === jobs ? true : undefined;
        },
        options.timeoutMs,
        `${jobs} jobs completed`,
      );
      // Every process stored some of the jobs: the writes of one document went through several.
      const storedBy = workers.map((w) => w.lines.filter((l) => l.json?.['msg'] === 'job stored').length);
      expect(storedBy.every((n) => n > 0), `jobs stored per worker process: ${storedBy.join(', ')}`).to.equal(true);
    },
    async close(failed) {
      if (failed) saveLogs(label, workers);
      await Promise.all(workers.splice(0).map((w) => w.kill()));
      await queue.obliterate({ force: true }).catch(() => undefined);
      await queue.close();
      connection.disconnect();
      await proxy?.close();
      await client.close();
    },
  };
}
