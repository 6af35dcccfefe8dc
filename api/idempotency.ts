import { createHash, randomBytes } from 'node:crypto';
import type { RedisClient } from '../shared/redis.js';

/** A claim this request holds: its value in Redis, so that only this request's claim is ever released. */
export interface IdempotencyClaim {
  readonly value: string;
}

type IdempotencyBegin =
  | { readonly state: 'new'; readonly claim: IdempotencyClaim }
  | { readonly state: 'replay'; readonly body: unknown }
  | { readonly state: 'reused' }
  | { readonly state: 'in_use' };

export interface IdempotencyStore {
  /**
   * The claim `begin` would set for this request: made before the call, so that a `begin` that
   * failed (a timeout: its `SET` may still land) can be released with {@link IdempotencyStore.release}.
   */
  claim(fingerprint: string): IdempotencyClaim;
  /** Claims `key` for this request with `claim`, or tells what an earlier request with the same key did. */
  begin(apiKey: string, key: string, fingerprint: string, claim: IdempotencyClaim): Promise<IdempotencyBegin>;
  /** Keeps the 200 body for replays during the TTL. */
  complete(apiKey: string, key: string, fingerprint: string, body: unknown): Promise<void>;
  /**
   * Releases `claim` after a failed request, so a retry can run: only while the key still holds
   * this very claim (not a later request's, once this one's expired). Sent on the connection
   * `begin` used, it runs after `begin`'s `SET` even when that one timed out here and lands late.
   */
  release(apiKey: string, key: string, claim: IdempotencyClaim): Promise<void>;
}

/** 1 to 255 printable ASCII characters without surrounding spaces (also the OpenAPI `pattern`). */
export const IDEMPOTENCY_KEY_RE = /^[\x21-\x7e][\x20-\x7e]{0,253}[\x21-\x7e]$|^[\x21-\x7e]$/;

export function isValidIdempotencyKey(key: string): boolean {
  return IDEMPOTENCY_KEY_RE.test(key);
}

/** Deletes KEYS[1] only while it holds ARGV[1] (one command: nothing can claim the key in between). */
const RELEASE_SCRIPT = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

/** Fingerprint of a request: the endpoint and its parsed body. */
export function requestFingerprint(endpoint: string, body: unknown): string {
  return createHash('sha256').update(endpoint).update('\0').update(JSON.stringify(body)).digest('base64url');
}

/**
 * Keys live in Redis under `<prefix>:idem:<sha256(apiKey, key)>`. A claim is one round trip
 * (`SET NX GET`, Redis >= 7): "p:<fp>" while the first request runs (short TTL, so a crash
 * cannot block the key for a day), then "d:<fp>:<json body>" for the TTL. A claim's value ends
 * with a random token ("p:<fp>:<token>"), so that a release removes only its own claim.
 */
export function createIdempotencyStore(options: { redis: RedisClient; prefix: string; ttlSeconds: number; pendingTtlSeconds: number }): IdempotencyStore {
  const { redis, prefix, ttlSeconds, pendingTtlSeconds } = options;
  const redisKey = (apiKey: string, key: string) =>
    `${prefix}:idem:${createHash('sha256').update(apiKey).update('\0').update(key).digest('base64url')}`;

  return {
    claim: (fingerprint) => ({ value: `p:${fingerprint}:${randomBytes(9).toString('base64url')}` }),
    async begin(apiKey, key, fingerprint, claim) {
      const previous = await redis.set(redisKey(apiKey, key), claim.value, 'EX', pendingTtlSeconds, 'NX', 'GET');
      if (previous === null) return { state: 'new', claim };
      const [kind, fp] = [previous.slice(0, 2), previous.slice(2, 2 + fingerprint.length)];
      if (fp !== fingerprint) return { state: 'reused' };
      if (kind === 'p:') return { state: 'in_use' };
      return { state: 'replay', body: JSON.parse(previous.slice(2 + fingerprint.length + 1)) as unknown };
    },
    async complete(apiKey, key, fingerprint, body) {
      await redis.set(redisKey(apiKey, key), `d:${fingerprint}:${JSON.stringify(body)}`, 'EX', ttlSeconds);
    },
    async release(apiKey, key, claim) {
      await redis.eval(RELEASE_SCRIPT, 1, redisKey(apiKey, key), claim.value);
    },
  };
}
