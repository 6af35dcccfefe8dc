import { Queue, type JobsOptions } from 'bullmq';
import type { Config } from './config.js';
import type { RedisClient } from './redis.js';
import { queueShards, shardOf, type QueueShard } from './redis-keys.js';
import type { JobData } from './job-payload.js';

/** The one job name on the write queue. */
export const WRITE_JOB_NAME = 'writes';

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

export type WriteQueue = Queue<JobData, unknown, typeof WRITE_JOB_NAME>;

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
    queue: new Queue<JobData, unknown, typeof WRITE_JOB_NAME>(config.queueName, {
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
