import { withTimeout } from '../shared/process.js';
import type { Logger } from '../shared/logger.js';
import type { WriteQueues } from '../shared/queue.js';

interface BacklogState {
  /** Waiting + delayed + prioritized jobs at the last poll; undefined before the first one. */
  readonly jobs: number | undefined;
  /** Whether the last poll reached Redis. */
  readonly redisReachable: boolean;
  readonly overloaded: boolean;
}

export interface BacklogMonitor {
  state(): BacklogState;
  /** Polls now (used at start and by /readyz). */
  refresh(): Promise<BacklogState>;
  stop(): void;
}

/**
 * Reads the backlog every `pollMs` instead of per request: a count per request would cost a
 * Redis round trip on the hot path, and the ceiling only needs to be roughly right.
 */
export function createBacklogMonitor(options: { queues: Pick<WriteQueues, 'count'>; maxJobs: number; pollMs: number; logger: Logger; timeoutMs: number }): BacklogMonitor {
  const { queues, maxJobs, pollMs, logger, timeoutMs } = options;
  let current: BacklogState = { jobs: undefined, redisReachable: false, overloaded: false };
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;

  async function refresh(): Promise<BacklogState> {
    try {
      // Summed over the shards: the ceiling bounds what Redis holds in all, not per shard.
      // Bounded, so that /readyz answers 503 while Redis has never been reached (BullMQ waits for it).
      const jobs = await withTimeout(queues.count('waiting', 'delayed', 'prioritized'), timeoutMs, 'Redis');
      const overloaded = jobs > maxJobs;
      if (overloaded && !current.overloaded) logger.warn({ jobs, maxJobs }, 'backlog above ceiling: refusing writes with 503 overloaded');
      current = { jobs, redisReachable: true, overloaded };
    } catch {
      current = { jobs: current.jobs, redisReachable: false, overloaded: current.overloaded };
    }
    return current;
  }

  const loop = () => {
    if (stopped) return;
    void refresh().finally(() => {
      if (!stopped) timer = setTimeout(loop, pollMs);
    });
  };
  timer = setTimeout(loop, 0);
  timer.unref();

  return {
    state: () => current,
    refresh,
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
