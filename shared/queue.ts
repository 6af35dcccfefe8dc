import { Queue, Worker, type Job, type JobsOptions, type WorkerOptions } from 'bullmq';
import type { Config } from './config.js';
import type { RedisClient } from './redis.js';
import { queueShards, shardOf, type QueueShard } from './redis-keys.js';
import type { JobData } from './job-payload.js';

/*
 * The queue contract, one place for both ends: the job name and its payload type (JobData of
 * shared/job-payload.ts, versioned there), and the BullMQ Queue and Worker of a shard built
 * from them. The API produces through createWriteQueues; the worker consumes through
 * createShardConsumer. A job of another name is not ours: the worker dead-letters it.
 */

/** The one job name on the write queue. */
export const WRITE_JOB_NAME = 'writes';
export type WriteJobName = typeof WRITE_JOB_NAME;

/** A job as the worker receives it: the name may be anything a producer wrote, the data is checked by decodeJob. */
export type WriteJob<R = unknown> = Job<JobData, R, string>;

const LEGACY_SEQ_STRIDE = 4096;

/**
 * The order of a write queued by a release that did not mint one in the API: jobId · 4096 + index.
 * For job ids below 10^11 such numbers stay under every order the API's clock mints from 2026 on
 * (shared/order-clock.ts: above 7·10^14), which is right: those writes were accepted before the
 * upgrade. Not for new writes: the job id counter goes back whenever Redis
 * loses data.
 */
export function legacyAcceptanceSeq(jobId: string | undefined, index: number): number | undefined {
  if (jobId === undefined || !/^\d{1,11}$/.test(jobId)) return undefined;
  return Number(jobId) * LEGACY_SEQ_STRIDE + index;
}

/** Options every write job gets: bounded retention, exponential backoff. */
function writeJobOptions(config: Pick<Config, 'jobAttempts' | 'jobBackoffMs' | 'keepCompletedJobs' | 'keepFailedJobs'>): JobsOptions {
  return {
    attempts: config.jobAttempts,
    backoff: { type: 'exponential', delay: config.jobBackoffMs },
    removeOnComplete: { count: config.keepCompletedJobs, age: 3600 },
    removeOnFail: { count: config.keepFailedJobs, age: 7 * 24 * 3600 },
  };
}

export type WriteQueue = Queue<JobData, unknown, WriteJobName>;

type QueueConfig = Pick<Config, 'queueName' | 'queueShards' | 'redisKeyPrefix' | 'redisClusterNodes' | 'jobAttempts' | 'jobBackoffMs' | 'keepCompletedJobs' | 'keepFailedJobs'>;

/** One shard's queue, with where it sits. */
export interface ShardQueue {
  readonly shard: QueueShard;
  readonly queue: WriteQueue;
}

/** The write queue: one BullMQ queue per shard (shared/redis-keys.ts), writes routed by record id. */
export interface WriteQueues {
  readonly shards: readonly ShardQueue[];
  /** The shard queue of a record and of its responses. */
  forRecord(recordId: string): ShardQueue;
  /** Sum over the shards of their job counts in `states`. */
  count(...states: Parameters<WriteQueue['getJobCountByTypes']>): Promise<number>;
  /** Job counts by state, summed over the shards. */
  counts(...states: Parameters<WriteQueue['getJobCounts']>): Promise<Record<string, number>>;
  close(): Promise<void>;
}

/** The producer side of the queue contract. `connection` should be a `producer` Redis. */
export function createWriteQueues(config: QueueConfig, connection: RedisClient): WriteQueues {
  const shards = queueShards(config).map((shard) => ({
    shard,
    queue: new Queue<JobData, unknown, WriteJobName>(config.queueName, {
      connection,
      prefix: shard.prefix,
      defaultJobOptions: writeJobOptions(config),
    }),
  }));
  return {
    shards,
    forRecord: (recordId) => shards[shardOf(recordId, shards.length)]!,
    async count(...states) {
      const each = await Promise.all(shards.map((s) => s.queue.getJobCountByTypes(...states)));
      return each.reduce((a, b) => a + b, 0);
    },
    async counts(...states) {
      const sum: Record<string, number> = {};
      for (const counts of await Promise.all(shards.map((s) => s.queue.getJobCounts(...states)))) {
        for (const [state, n] of Object.entries(counts)) sum[state] = (sum[state] ?? 0) + n;
      }
      return sum;
    },
    async close() {
      await Promise.all(shards.map((s) => s.queue.close()));
    },
  };
}

/** The consumer side of one shard: the queue (for the worker's rate limit while the store is down) and its worker. */
export interface ShardConsumer<R = unknown> {
  readonly shard: QueueShard;
  readonly queue: WriteQueue;
  /** Its jobs' results are what `process` returns (the worker's job summary). */
  readonly worker: Worker<JobData, R, string>;
}

/** A BullMQ worker of one shard: the one {@link createShardConsumer} starts, or one that replaces it (worker/shard-watch.ts). */
export function createShardWorker<R>(
  config: Pick<Config, 'queueName'>,
  connection: RedisClient,
  shard: QueueShard,
  process: (job: WriteJob<R>) => Promise<R>,
  options: Pick<WorkerOptions, 'concurrency' | 'lockDuration' | 'maxStalledCount' | 'stalledInterval'>,
): Worker<JobData, R, string> {
  return new Worker<JobData, R, string>(config.queueName, process, { ...options, connection, prefix: shard.prefix });
}

/**
 * The worker's end of the contract for one shard, with {@link createShardWorker}'s arguments.
 * `connection` should be a `worker` Redis; `process` gets every job of the shard's queue, whatever
 * its name (see {@link isWriteJob}).
 */
export function createShardConsumer<R>(...args: Parameters<typeof createShardWorker<R>>): ShardConsumer<R> {
  const [config, connection, shard] = args;
  const queue = new Queue<JobData, unknown, WriteJobName>(config.queueName, { connection, prefix: shard.prefix });
  return { shard, queue, worker: createShardWorker<R>(...args) };
}

/** True when `job` is a write job: the only name this contract knows. */
export function isWriteJob(job: Pick<WriteJob, 'name'>): boolean {
  return job.name === WRITE_JOB_NAME;
}
