import { Queue, type JobsOptions } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Config } from './config.js';
import type { JobData } from './schemas.js';

/** The one job name on the write queue. */
export const WRITE_JOB_NAME = 'writes';

/**
 * Writes in one job are at most this many apart in the acceptance sequence: seq = jobId * SEQ_STRIDE
 * + index. Redis assigns job ids with INCR when the job is added, so the pair orders every write by
 * the moment Redis acknowledged it, across any number of API processes.
 */
export const SEQ_STRIDE = 4096;

export function acceptanceSeq(jobId: string | undefined, index: number): number | undefined {
  if (jobId === undefined || !/^\d{1,15}$/.test(jobId)) return undefined;
  return Number(jobId) * SEQ_STRIDE + index;
}

/** Options every write job gets: bounded retention, exponential backoff. */
export function writeJobOptions(config: Pick<Config, 'jobAttempts' | 'jobBackoffMs' | 'keepCompletedJobs' | 'keepFailedJobs'>): JobsOptions {
  return {
    attempts: config.jobAttempts,
    backoff: { type: 'exponential', delay: config.jobBackoffMs },
    removeOnComplete: { count: config.keepCompletedJobs, age: 3600 },
    removeOnFail: { count: config.keepFailedJobs, age: 7 * 24 * 3600 },
  };
}

export type WriteQueue = Queue<JobData, unknown, typeof WRITE_JOB_NAME>;

/** The producer side of the queue contract. `connection` should be a `producer` Redis. */
export function createWriteQueue(config: Pick<Config, 'queueName' | 'jobAttempts' | 'jobBackoffMs' | 'keepCompletedJobs' | 'keepFailedJobs'>, connection: Redis): WriteQueue {
  return new Queue<JobData, unknown, typeof WRITE_JOB_NAME>(config.queueName, {
    connection,
    defaultJobOptions: writeJobOptions(config),
  });
}
