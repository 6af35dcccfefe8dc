import type { RedisClient } from '../shared/redis.js';
import type { ApiMiddleware } from './state.js';
import { RateLimiterRedis, RateLimiterRes, RLWrapperTimeouts } from 'rate-limiter-flexible';
import { AppError } from '../shared/errors.js';
import type { Logger } from '../shared/logger.js';
import type { ApiMetrics } from './metrics.js';

/** The window of a per-minute limit, seconds. */
const WINDOW_SECONDS = 60;

interface RateLimiterOptions {
  /** The API's producer connection (no offline queue, so a check fails at once while Redis is down). */
  readonly redis: RedisClient;
  /** Namespace of the counters, `<prefix>:ratelimit:<key name>` (shared/redis-keys.ts `appKeyPrefix`), like the idempotency keys. */
  readonly prefix: string;
  /** Requests per minute for a key without its own limit; 0 = no limit. */
  readonly defaultPerMinute: number;
  /** Longest wait for Redis before the request is let through anyway, ms. */
  readonly timeoutMs: number;
  readonly logger: Logger;
  readonly metrics: Pick<ApiMetrics, 'rateLimitFailOpen'>;
}

/**
 * The limit of the authenticated key: its own `rateLimitPerMinute` when it carries one (keys
 * stored in MongoDB may), else the configured default. 0 means unlimited.
 */
export function effectiveLimitPerMinute(apiKey: unknown, defaultPerMinute: number): number {
  const own = (apiKey as { rateLimitPerMinute?: unknown } | undefined)?.rateLimitPerMinute;
  return typeof own === 'number' && Number.isInteger(own) && own >= 0 ? own : defaultPerMinute;
}

/** Whole seconds, at least 1, so a client never retries at once. */
const seconds = (ms: number) => Math.max(1, Math.ceil(ms / 1000));

/**
 * Per-key limit on the write routes, counted in Redis so that every API process shares one
 * budget per key: a fixed 60 s window (rate-limiter-flexible's RateLimiterRedis, one Lua script
 * per request). Place it after authentication.
 *
 * When Redis cannot answer (down, or slower than `timeoutMs`), the request goes through: the
 * limit protects capacity, and with Redis down the enqueue answers 503 anyway, so refusing here
 * would only replace that 503 with a 500. Logged once per outage and counted.
 */
export function createRateLimiter(options: RateLimiterOptions): ApiMiddleware {
  const { redis, prefix, defaultPerMinute, timeoutMs, logger, metrics } = options;
  // RateLimiterRedis compares the shared counter with its own `points`, so one instance serves
  // every key with the same limit; the Redis key does not depend on the limit.
  const limiters = new Map<number, RLWrapperTimeouts>();
  const limiterFor = (points: number) => {
    let limiter = limiters.get(points);
    if (limiter === undefined) {
      const counter = new RateLimiterRedis({ storeClient: redis, keyPrefix: `${prefix}:ratelimit`, points, duration: WINDOW_SECONDS });
      limiter = new RLWrapperTimeouts({ limiter: counter, timeoutMs });
      limiters.set(points, limiter);
    }
    return limiter;
  };
  let failing = false;

  /** The counter after this request; undefined when Redis could not tell (fail open). */
  const consume = async (name: string, points: number): Promise<{ res: RateLimiterRes; over: boolean } | undefined> => {
    try {
      const res = await limiterFor(points).consume(name);
      return { res, over: false };
    } catch (caught) {
      // The library rejects with the counter when the limit is exceeded, with an Error otherwise.
      if (caught instanceof RateLimiterRes) return { res: caught, over: true };
      metrics.rateLimitFailOpen.inc();
      if (!failing) logger.warn({ err: (caught as Error).message }, 'rate limit check failed: letting requests through until Redis answers');
      failing = true;
      return undefined;
    }
  };

  return async (ctx, next) => {
    const apiKey = ctx.state.apiKey;
    const limit = apiKey === undefined ? 0 : effectiveLimitPerMinute(apiKey, defaultPerMinute);
    if (apiKey === undefined || limit === 0) return next();
    const counted = await consume(apiKey.name, limit);
    if (counted === undefined) return next();
    if (failing) {
      logger.info('rate limit checks answered again');
      failing = false;
    }
    const { res, over } = counted;
    const headers = {
      'RateLimit-Limit': String(limit),
      'RateLimit-Remaining': String(res.remainingPoints),
      'RateLimit-Reset': String(seconds(res.msBeforeNext)),
    };
    if (over) {
      throw new AppError('rate_limited', `this API key may make ${limit} write requests per minute; retry after ${headers['RateLimit-Reset']} s`, {
        headers: { ...headers, 'Retry-After': headers['RateLimit-Reset'] },
      });
    }
    ctx.set(headers);
    return next();
  };
}
