import type { Logger } from '../shared/logger.js';

/** A set the API holds in memory and reloads from MongoDB (stored keys, dataset definitions). */
export interface PeriodicReload {
  /**
   * Loads once, then every `refreshMs`. Resolves when the first load succeeded or failed, which
   * takes `firstLoadTimeoutMs` at the most: the API starts while MongoDB is down and picks the set
   * up at the first reload that succeeds.
   */
  start(firstLoadTimeoutMs: number): Promise<void>;
  /**
   * One load that starts after this call (after the load in flight, if any, which may have read
   * before the caller's write); false when MongoDB did not answer (the last set stays in use).
   */
  refresh(): Promise<boolean>;
  /** Stops reloading and waits for a load in flight, so that MongoDB can be closed after it. */
  close(): Promise<void>;
  /**
   * Whether a load has succeeded since the process started. Until one has, the set is empty
   * because MongoDB did not answer, not because it is: a lookup that finds nothing then proves
   * nothing (api/middleware/auth.ts answers 503, not 401).
   */
  loaded(): boolean;
}

/** The pause between two tries of the first load, ms. */
const FIRST_LOAD_PAUSE_MS = 250;

/**
 * Runs `load` now and every `refreshMs`, one at a time. A failed load keeps the last set (the
 * caller swaps its set only on success) and is logged once per outage, with `what` and
 * `held()`, the size of the set kept; the first success after it is logged too.
 */
export function createPeriodicReload(options: {
  /** Loads and swaps the set; `timeoutMs` bounds the whole load (the driver's `timeoutMS`). Returns the size loaded. */
  readonly load: (timeoutMs: number | undefined) => Promise<number>;
  readonly refreshMs: number;
  readonly logger: Logger;
  /** What is held, for the log lines: "stored API keys", "dataset definitions". */
  readonly what: string;
  readonly held: () => number;
}): PeriodicReload {
  const { load, refreshMs, logger, what, held } = options;
  let failing = false;
  let everLoaded = false;
  let inFlight: Promise<boolean> | undefined;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;

  async function attempt(timeoutMs?: number): Promise<boolean> {
    try {
      const size = await load(timeoutMs);
      everLoaded = true;
      if (failing) logger.info({ size }, `${what} loaded again`);
      failing = false;
      return true;
    } catch (err) {
      if (!failing) logger.warn({ err: (err as Error).message, size: held() }, `could not load the ${what}; keeping the last loaded ones`);
      failing = true;
      return false;
    }
  }

  let queued: Promise<boolean> | undefined;

  function run(timeoutMs?: number): Promise<boolean> {
    inFlight = attempt(timeoutMs).finally(() => {
      inFlight = undefined;
    });
    return inFlight;
  }

  /**
   * A load that starts after this call, so that it sees every write made before it (a PUT that
   * reloads at once). A load in flight may have read before that write: joining it would keep
   * the old set until the next period, so one more load follows it, shared by every caller that
   * came meanwhile. Loads never overlap, so the last one started is the last one applied.
   */
  function refresh(timeoutMs?: number): Promise<boolean> {
    if (queued !== undefined) return queued;
    if (inFlight === undefined) return run(timeoutMs);
    queued = inFlight.then(() => {
      queued = undefined;
      return run(timeoutMs);
    });
    return queued;
  }

  function schedule(): void {
    if (stopped) return;
    timer = setTimeout(() => {
      void refresh().then(schedule);
    }, refreshMs);
    timer.unref();
  }

  return {
    refresh: () => refresh(),
    async start(firstLoadTimeoutMs) {
      // Tried again until the bound: a load that fails at once (the driver's first connection
      // still being made again, shared/mongo.ts) may succeed a moment later.
      const deadline = Date.now() + firstLoadTimeoutMs;
      while (!stopped && !(await refresh(Math.max(1, deadline - Date.now()))) && Date.now() + FIRST_LOAD_PAUSE_MS < deadline) {
        await new Promise((resolve) => setTimeout(resolve, FIRST_LOAD_PAUSE_MS));
      }
      schedule();
    },
    loaded: () => everLoaded,
    async close() {
      stopped = true;
      clearTimeout(timer);
      await (queued ?? inFlight);
    },
  };
}
