import { createHash } from 'node:crypto';
import type { RedisClient } from '../shared/redis.js';

type IdempotencyBegin =
  | { readonly state: 'new' }
  | { readonly state: 'replay'; readonly body: unknown }
  | { readonly state: 'reused' }
  | { readonly state: 'in_use' };

export interface IdempotencyStore {
  /** Claims `key` for this request, or tells what an earlier request with the same key did. */
  begin(apiKey: string, key: string, fingerprint: string): Promise<IdempotencyBegin>;
  /** Keeps the 200 body for replays during the TTL. */
  complete(apiKey: string, key: string, fingerprint: string, body: unknown): Promise<void>;
  /** Releases the claim after a failed request, so a retry can run. */
  abort(apiKey: string, key: string): Promise<void>;
}

/** 1 to 255 printable ASCII characters without surrounding spaces (also the OpenAPI `pattern`). */
export const IDEMPOTENCY_KEY_RE = /^[\x21-\x7e][\x20-\x7e]{0,253}[\x21-\x7e]$|^[\x21-\x7e]$/;

export function isValidIdempotencyKey(key: string): boolean {
  return IDEMPOTENCY_KEY_RE.test(key);
}

/** Fingerprint of a request: the endpoint and its parsed body. */
export function requestFingerprint(endpoint: string, body: unknown): string {
  return createHash('sha256').update(endpoint).update('\0').update(JSON.stringify(body)).digest('base64url');
}

/**
 * Keys live in Redis under `<prefix>:idem:<sha256(apiKey, key)>`. A claim is one round trip
 * (`SET NX GET`, Redis >= 7): "p:<fp>" while the first request runs (short TTL, so a crash
 * cannot block the key for a day), then "d:<fp>:<json body>" for the TTL.
 */
export function createIdempotencyStore(options: { redis: RedisClient; prefix: string; ttlSeconds: number; pendingTtlSeconds: number }): IdempotencyStore {
  const { redis, prefix, ttlSeconds, pendingTtlSeconds } = options;
  const redisKey = (apiKey: string, key: string) =>
    `${prefix}:idem:${createHash('sha256').update(apiKey).update('\0').update(key).digest('base64url')}`;

  return {
    async begin(apiKey, key, fingerprint) {
      const previous = await redis.set(redisKey(apiKey, key), `p:${fingerprint}`, 'EX', pendingTtlSeconds, 'NX', 'GET');
      if (previous === null) return { state: 'new' };
      const [kind, fp] = [previous.slice(0, 2), previous.slice(2, 2 + fingerprint.length)];
      if (fp !== fingerprint) return { state: 'reused' };
      if (kind === 'p:') return { state: 'in_use' };
      return { state: 'replay', body: JSON.parse(previous.slice(2 + fingerprint.length + 1)) as unknown };
    },
    async complete(apiKey, key, fingerprint, body) {
      await redis.set(redisKey(apiKey, key), `d:${fingerprint}:${JSON.stringify(body)}`, 'EX', ttlSeconds);
    },
    async abort(apiKey, key) {
      await redis.del(redisKey(apiKey, key));
    },
  };
}
