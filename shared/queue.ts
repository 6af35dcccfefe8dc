import { Queue, type JobsOptions } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Config } from './config.js';
import type { JobData } from './schemas.js';

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

/** The producer side of the queue contract. `connection` should be a `producer` Redis. */
export function createWriteQueue(config: Pick<Config, 'queueName' | 'jobAttempts' | 'jobBackoffMs' | 'keepCompletedJobs' | 'keepFailedJobs'>, connection: Redis): WriteQueue {
  return new Queue<JobData, unknown, typeof WRITE_JOB_NAME>(config.queueName, {
    connection,
    defaultJobOptions: writeJobOptions(config),
  });
}
