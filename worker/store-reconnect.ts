import { MongoClient } from 'mongodb';
import type { Config } from '../shared/config.js';
import type { Logger } from '../shared/logger.js';

/** How long every store round must have failed before the client is replaced, ms. */
export const RECONNECT_AFTER_MS = 20_000;
/** How long the worker's client is given to answer once the store answers (the driver's heartbeat is 10 s), ms. */
export const CLIENT_ANSWER_WAIT_MS = 12_000;
/** Between two attempts to connect the new client, ms. */
const CONNECT_RETRY_MS = 1_000;

export interface StoreReconnector {
  /** A store round failed as an outage (worker/errors.ts). */
  failed(): void;
  /** A store round succeeded. */
  succeeded(): void;
  /** Stops a reconnect under way (the worker is closing). */
  close(): Promise<void>;
}

/**
 * Gives the worker's MongoDB client a new topology (once a separate connection reaches the store:
 * close, then connect) once
 * every store round has failed as an outage for {@link RECONNECT_AFTER_MS}. Seen on the stand-in
 * (2026-11-26, `FerretDB stopped 30 s` fault scenario, about one run in three, also on the code
 * before that day's changes): after FerretDB was stopped and started again, every operation of the
 * worker failed at once with the same `connection 1 to … closed` for minutes, the driver (7.9)
 * never opening a new connection, and the backlog never drained. A new topology recovers. During
 * an ordinary outage the new client cannot connect either, and keeps trying every second; jobs
 * meanwhile fail as outages (a closed client's `MongoNotConnectedError` is one) and use no attempt.
 */
export function createStoreReconnector(options: {
  readonly client: MongoClient;
  /**
   * Whether the store answers a new, separate connection. The client is closed and connected
   * again only once it does: a connect that fails leaves the client with a closed topology, and a
   * later connect once hung (CI, 2026-11-26).
   */
  readonly probe: () => Promise<boolean>;
  /**
   * Whether the worker's own client answers (a `ping`, bounded in time). Once the store answers,
   * a client that answers too is left as it is the first time: closing it while the jobs taken
   * meanwhile run on it once left a store call that never settled and stopped the worker (CI,
   * 2026-11-26, 'FerretDB stopped 30 s': the client had recovered on its own before it was
   * closed). Only a client that still fails, or a second full period of failed rounds, gets a
   * new topology.
   */
  readonly clientAnswers: () => Promise<boolean>;
  readonly logger: Logger;
  readonly afterMs?: number;
  /** How long the worker's client is given to answer once the store does (its monitor notices within a heartbeat), ms. */
  readonly answerWaitMs?: number;
  readonly now?: () => number;
}): StoreReconnector {
  const afterMs = options.afterMs ?? RECONNECT_AFTER_MS;
  const now = options.now ?? Date.now;
  let failingSince: number | undefined;
  let running: Promise<void> | undefined;
  let stopped = false;
  /** The last reconnect found the client answering and left it: the next one replaces it whatever it answers. */
  let leftAnswering = false;

  /** Whether the client answers, asked every second until `waitMs` has passed (real time). */
  async function answersWithin(waitMs: number): Promise<boolean> {
    const until = Date.now() + waitMs;
    for (;;) {
      if (await options.clientAnswers().catch(() => false)) return true;
      if (stopped || Date.now() >= until) return false;
      await new Promise((r) => setTimeout(r, CONNECT_RETRY_MS).unref());
    }
  }

  async function reconnect(): Promise<void> {
    options.logger.warn({ failing_for_ms: now() - (failingSince ?? now()) }, 'every store round failed for a while: the MongoDB client gets a new connection pool once the store answers');
    // Until a separate connection reaches the store (an ordinary outage ends).
    while (!stopped && !(await options.probe().catch(() => false))) await new Promise((r) => setTimeout(r, CONNECT_RETRY_MS).unref());
    if (stopped) return;
    if (!leftAnswering && (await answersWithin(options.answerWaitMs ?? CLIENT_ANSWER_WAIT_MS))) {
      leftAnswering = true;
      options.logger.info('the store and the MongoDB client answer again: the client is kept');
      return;
    }
    leftAnswering = false;
    await options.client.close().catch(() => undefined);
    while (!stopped) {
      try {
        await options.client.connect();
        options.logger.info('MongoDB client connected again');
        return;
      } catch (err) {
        options.logger.warn({ err: (err as Error).message }, 'MongoDB client could not connect; retrying');
        await new Promise((r) => setTimeout(r, CONNECT_RETRY_MS).unref());
      }
    }
  }

  return {
    failed() {
      const t = now();
      failingSince ??= t;
      if (running !== undefined || stopped || t - failingSince < afterMs) return;
      running = reconnect().finally(() => {
        running = undefined;
        // The next reconnect needs another full period of failures.
        failingSince = undefined;
      });
    },
    succeeded() {
      failingSince = undefined;
      leftAnswering = false;
    },
    async close() {
      stopped = true;
      await running;
    },
  };
}

/** Whether `client` answers a `ping` within `timeoutMs` (a call that never settles counts as no answer). */
export async function clientAnswers(client: MongoClient, timeoutMs: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs).unref()));
  const ping = client
    .db('admin')
    .command({ ping: 1 }, { timeoutMS: timeoutMs })
    .then(() => true)
    .catch(() => false);
  try {
    return await Promise.race([ping, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** Whether a new, short-lived client reaches the store (`ping`) within MONGODB_TIMEOUT_MS. */
export async function probeStore(config: Pick<Config, 'mongodbUri' | 'mongodbTimeoutMs'>): Promise<boolean> {
  const probe = new MongoClient(config.mongodbUri, { serverSelectionTimeoutMS: config.mongodbTimeoutMs, connectTimeoutMS: config.mongodbTimeoutMs, maxPoolSize: 1 });
  try {
    await probe.db('admin').command({ ping: 1 });
    return true;
  } catch {
    return false;
  } finally {
    await probe.close().catch(() => undefined);
  }
}
