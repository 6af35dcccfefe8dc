import { ConfigError, loadConfig, type Config } from './config.js';
import type { Logger } from './logger.js';

/** For the two main.ts files: one line naming the bad variable, then exit 1. */
export function loadConfigOrExit(env: Readonly<Record<string, string | undefined>>): Config {
  try {
    return loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(1);
    }
    throw err;
  }
}

/**
 * SIGTERM/SIGINT run `stop` once; if it has not finished within `timeoutMs` the process exits
 * with 1 anyway (the platform would SIGKILL it soon after). Nothing is lost either way: a job
 * whose worker dies is taken up again when its lock expires.
 */
export function onShutdownSignal(logger: Logger, timeoutMs: number, stop: () => Promise<void>): void {
  let stopping = false;
  const handler = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal, timeout_ms: timeoutMs }, 'shutting down');
    const timer = setTimeout(() => {
      logger.error({ timeout_ms: timeoutMs }, 'shutdown timed out; exiting');
      process.exit(1);
    }, timeoutMs);
    timer.unref();
    stop().then(
      () => {
        logger.info('shut down cleanly');
        process.exit(0);
      },
      (err: unknown) => {
        logger.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', handler);
  process.on('SIGINT', handler);
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Thrown by {@link withTimeout} when the promise did not settle in time. */
export class TimeoutError extends Error {
  constructor(what: string, ms: number) {
    super(`${what} did not answer within ${ms} ms`);
    this.name = 'TimeoutError';
  }
}

/**
 * `promise`, or a {@link TimeoutError} after `ms`. The work itself is not cancelled: use it where
 * a late outcome is harmless or already accounted for (a job Redis gets later is stored once).
 */
export function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new TimeoutError(what, ms)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
