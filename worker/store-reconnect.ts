import { MongoClient } from 'mongodb';
import type { Config } from '../shared/config.js';
import type { Logger } from '../shared/logger.js';

/** How long every store round must have failed before the client is replaced, ms. */
export const RECONNECT_AFTER_MS = 20_000;
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
  readonly logger: Logger;
  readonly afterMs?: number;
  readonly now?: () => number;
}): StoreReconnector {
  const afterMs = options.afterMs ?? RECONNECT_AFTER_MS;
  const now = options.now ?? Date.now;
  let failingSince: number | undefined;
  let running: Promise<void> | undefined;
  let stopped = false;

  async function reconnect(): Promise<void> {
    options.logger.warn({ failing_for_ms: now() - (failingSince ?? now()) }, 'every store round failed for a while: the MongoDB client gets a new connection pool once the store answers');
    // Until a separate connection reaches the store (an ordinary outage ends).
    while (!stopped && !(await options.probe().catch(() => false))) await new Promise((r) => setTimeout(r, CONNECT_RETRY_MS).unref());
    if (stopped) return;
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
    },
    async close() {
      stopped = true;
      await running;
    },
  };
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
