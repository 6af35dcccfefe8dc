/*
 * How many jobs a worker process holds at once. A store round merges the writes of the jobs in
 * hand, so with the API's small jobs (a few writes each at moderate load) a round needs many
 * jobs; with large jobs (up to BATCH_MAX_ITEMS writes, BATCH_MAX_BYTES) a few are enough, and
 * many would hold hundreds of megabytes. The worker aims at `writesInHand` writes held, from the
 * average size of the jobs it finished, between one job per shard and `maxJobs`.
 */

export interface ConcurrencyLimits {
  /** WORKER_CONCURRENCY: most jobs held by the process, over all shards. */
  readonly maxJobs: number;
  /** WORKER_WRITES_IN_HAND: writes the process aims to hold. */
  readonly writesInHand: number;
  readonly shards: number;
}

/** Jobs to hold per shard when the jobs carry `writesPerJob` writes on average. */
export function concurrencyPerShard(writesPerJob: number, limits: ConcurrencyLimits): number {
  const jobs = Math.min(limits.maxJobs, Math.ceil(limits.writesInHand / Math.max(1, writesPerJob)));
  return Math.max(1, Math.ceil(jobs / limits.shards));
}

/** Running average of writes per job (exponential, weight `alpha` for the newest). */
export function createJobSizeAverage(initial: number, alpha = 0.1): { observe(writes: number): number; readonly value: number } {
  let value = initial;
  return {
    observe(writes) {
      value += alpha * (writes - value);
      return value;
    },
    get value() {
      return value;
    },
  };
}
