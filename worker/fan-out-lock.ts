import { randomBytes } from 'node:crypto';
import type { RedisClient } from '../shared/redis.js';
import { TransientStoreError } from './errors.js';

/*
 * The lock of the webhook fan-out (worker/webhook-fan-out.ts): one Redis key, SET NX PX with a
 * token, released only by its holder (compare and delete). It makes the fan-out run in one worker
 * process at a time, so that batches move into the outbox in their order, and it keeps an erasure
 * from removing a batch's events while a fan-out is copying them out (worker/erasure-outbox.ts).
 * A holder that dies leaves the key to expire after `ttlMs`. The single-instance form of the
 * Redis documentation's lock is all this needs (one Redis, or one slot of a Cluster): no Redlock.
 */

/** Deletes the key only if it still holds this token. */
const RELEASE = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`;

/** The lock could not be taken within its wait: the caller's job is retried. */
export class FanOutLockBusyError extends TransientStoreError {
  constructor(waitedMs: number) {
    super(new Error(`the webhook fan-out lock stayed taken for ${waitedMs} ms`));
    this.name = 'FanOutLockBusyError';
  }
}

export interface FanOutLock {
  /** Runs `fn` holding the lock if it is free now; undefined (fn not run) if another holds it. Redis unreachable: TransientStoreError. */
  tryWith<T>(fn: () => Promise<T>): Promise<T | undefined>;
  /** Runs `fn` holding the lock, waiting for it up to the lock's lifetime; throws FanOutLockBusyError after that. */
  with<T>(fn: () => Promise<T>): Promise<T>;
}

export function createFanOutLock(options: { readonly redis: RedisClient; readonly key: string; readonly ttlMs?: number; readonly pollMs?: number }): FanOutLock {
  const ttlMs = options.ttlMs ?? 30_000;
  const pollMs = options.pollMs ?? 20;
  const { redis, key } = options;

  async function take(): Promise<string | undefined> {
    const token = randomBytes(12).toString('hex');
    try {
      return (await redis.set(key, token, 'PX', ttlMs, 'NX')) === 'OK' ? token : undefined;
    } catch (err) {
      // Redis unreachable: the caller's job waits and runs again, as in a store outage, without using an attempt.
      throw new TransientStoreError(err);
    }
  }
  async function holding<T>(token: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } finally {
      await redis.eval(RELEASE, 1, key, token).catch(() => undefined);
    }
  }

  return {
    async tryWith(fn) {
      const token = await take();
      return token === undefined ? undefined : holding(token, fn);
    },
    async with(fn) {
      const started = Date.now();
      for (;;) {
        const token = await take();
        if (token !== undefined) return holding(token, fn);
        if (Date.now() - started > ttlMs) throw new FanOutLockBusyError(Date.now() - started);
        await new Promise((r) => setTimeout(r, pollMs));
      }
    },
  };
}
