/**
 * Notices a shard's BullMQ worker that has stopped taking jobs although jobs wait for it.
 *
 * BullMQ's fetch loop takes a shard's jobs one blocking read after another. After a Redis Cluster
 * failover, a fresh-clone CI run saw both worker processes log `Too many Cluster redirections`
 * for the killed master's shard and then take none of its jobs for 180 s, while their other
 * shards went on: the loop was parked on a connection that never came back (BullMQ's own
 * watchdog awaits the blocking connection's reconnect without a bound). Whatever parks it, the
 * symptom is the same and can be seen from outside: jobs waiting in the shard, none in this
 * process's hands, none started for `stuckMs`, and the queue not rate-limited (the worker's own
 * pause while MongoDB is down). worker/runtime.ts then replaces that shard's BullMQ worker.
 *
 * A worker that is merely busy is never taken for stuck: it has jobs in hand. One that is idle
 * takes a waiting job within milliseconds (the queue's marker wakes its blocking read), or at the
 * latest after BullMQ's longest block (10 s) and its watchdog (1 s): `stuckMs` (default 30 s) is
 * well above both.
 */
import type { Counter } from 'prom-client';
import type { Logger } from '../shared/logger.js';
import { withTimeout } from '../shared/process.js';

/** What the runtime reads of a shard at each check. */
export interface ShardObservation {
  /** Jobs of the shard in this process's hands now. */
  readonly inHand: number;
  /** When this process last started a job of the shard (ms since epoch; 0: never). */
  readonly lastStartAt: number;
  /** Jobs waiting in the shard's queue (Redis). */
  readonly waiting: number;
  /** Milliseconds left of the queue's rate limit (0: none). */
  readonly rateLimitMs: number;
}

export type ShardVerdict = 'ok' | 'suspect' | 'stuck';

/** The verdict of one shard over successive checks. Pure: the clock is an argument. */
export interface ShardWatch {
  check(observation: ShardObservation, now: number): ShardVerdict;
  /** After the runtime replaced the shard's worker: the watch starts over. */
  reset(): void;
}

export function createShardWatch(stuckMs: number): ShardWatch {
  /** Since when the shard has looked stuck without a break (undefined: it does not). */
  let suspectSince: number | undefined;
  return {
    check(o, now) {
      if (o.inHand > 0 || o.waiting === 0 || o.rateLimitMs > 0) {
        suspectSince = undefined;
        return 'ok';
      }
      // A job started since the suspicion began: the loop moves (another one may be on its way).
      if (suspectSince === undefined || o.lastStartAt > suspectSince) {
        suspectSince = now;
        return 'suspect';
      }
      return now - suspectSince >= stuckMs ? 'stuck' : 'suspect';
    },
    reset() {
      suspectSince = undefined;
    },
  };
}

/** Jobs of one shard in this process's hands, and when the last one started. */
export interface ShardActivity {
  /** Wraps the shard's job function: counts the job in hand while it runs. */
  track<T>(run: () => Promise<T>): Promise<T>;
  inHand(): number;
  lastStartAt(): number;
}

export function createShardActivity(now: () => number = Date.now): ShardActivity {
  let inHand = 0;
  let lastStartAt = 0;
  return {
    async track(run) {
      inHand++;
      lastStartAt = now();
      try {
        return await run();
      } finally {
        inHand--;
      }
    },
    inHand: () => inHand,
    lastStartAt: () => lastStartAt,
  };
}

/** One shard as worker/runtime.ts holds it: its queue, its current BullMQ worker, and how to start another. */
export interface WatchedShard<W extends { close(force?: boolean): Promise<void> }> {
  readonly shard: { readonly index: number };
  readonly queue: { getWaitingCount(): Promise<number>; getRateLimitTtl(): Promise<number> };
  worker: W;
  readonly activity: ShardActivity;
  readonly watch: ShardWatch;
  /** A new worker for the shard, in place of `old` (whose settings it takes over). */
  spawn(old: W): W;
}

/**
 * Checks every shard every `stuckMs / 4` and replaces the BullMQ worker of one found stuck: a new
 * worker (its own blocking connection, its own fetch loop and stalled-job check) takes the shard;
 * the old one is closed without waiting for it (it holds no job of ours, and its close may hang
 * where its loop hangs). Returns the function that stops the checks.
 */
export function watchShards<W extends { close(force?: boolean): Promise<void> }>(
  shards: readonly WatchedShard<W>[],
  options: { readonly stuckMs: number; readonly timeoutMs: number; readonly logger: Logger; readonly restarts: Counter<'shard'> },
): () => void {
  const { stuckMs, timeoutMs, logger, restarts } = options;
  const everyMs = Math.max(250, Math.floor(stuckMs / 4));
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;

  async function checkOne(s: WatchedShard<W>): Promise<void> {
    let waiting: number;
    let rateLimitMs: number;
    try {
      [waiting, rateLimitMs] = await withTimeout(Promise.all([s.queue.getWaitingCount(), s.queue.getRateLimitTtl()]), timeoutMs, 'Redis');
    } catch {
      // Nothing to judge by while Redis does not answer: the watch starts over once it does.
      s.watch.reset();
      return;
    }
    const observation = { inHand: s.activity.inHand(), lastStartAt: s.activity.lastStartAt(), waiting, rateLimitMs: Math.max(0, rateLimitMs) };
    if (stopped || s.watch.check(observation, Date.now()) !== 'stuck') return;
    logger.warn({ shard: s.shard.index, waiting, last_job_started_at: observation.lastStartAt === 0 ? null : new Date(observation.lastStartAt).toISOString(), stuck_ms: stuckMs }, 'shard worker took no job although jobs wait; replacing it');
    restarts.inc({ shard: String(s.shard.index) });
    const old = s.worker;
    s.worker = s.spawn(old);
    s.watch.reset();
    old.close(true).catch((err: unknown) => logger.debug({ err: (err as Error).message, shard: s.shard.index }, 'closing a replaced shard worker failed'));
  }

  const loop = () => {
    if (stopped) return;
    void Promise.all(shards.map((s) => checkOne(s))).finally(() => {
      if (stopped) return;
      timer = setTimeout(loop, everyMs);
      timer.unref();
    });
  };
  timer = setTimeout(loop, everyMs);
  timer.unref();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
