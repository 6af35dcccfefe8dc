import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Redis } from 'ioredis';
import type { Config } from '../shared/config.js';
import { createIdMinter } from '../shared/ids.js';
import type { Logger } from '../shared/logger.js';
import { createWriteQueue, type WriteQueue } from '../shared/queue.js';
import { checkEvictionPolicy, createRedis } from '../shared/redis.js';
import { createApp } from './app.js';
import { createBacklogMonitor } from './backlog.js';
import { createBatchingEnqueuer } from './enqueuer.js';
import { createIdempotencyStore } from './idempotency.js';
import { createApiMetrics } from './metrics.js';
import { createKeyVerifier } from './middleware/auth.js';

export interface ApiServer {
  readonly server: Server;
  readonly port: number;
  readonly queue: WriteQueue;
  readonly redis: Redis;
  /** Stops accepting, answers what is in flight, flushes queued writes, closes Redis. */
  close(): Promise<void>;
}

/** Builds everything the API needs from `config` and listens. */
export async function startApi(config: Config, logger: Logger): Promise<ApiServer> {
  if (config.apiKeys.length === 0) logger.warn('API_KEYS is empty: every write will be refused with 401');
  if (config.idSigningSecretIsDefault) logger.warn('ID_SIGNING_SECRETS is not set: using the development secret (set it in production)');
  const redis = createRedis(config, 'producer', logger);
  const queue = createWriteQueue(config, redis);
  const metrics = createApiMetrics({ defaultMetrics: true });
  const backlog = createBacklogMonitor({ queue, maxJobs: config.backlogMaxJobs, pollMs: config.backlogPollMs, logger, onSample: (jobs) => metrics.backlogJobs.set(jobs) });
  const enqueuer = createBatchingEnqueuer({
    queue,
    logger,
    metrics,
    maxItems: config.batchMaxItems,
    maxInFlight: config.batchMaxInFlight,
    timeoutMs: config.enqueueTimeoutMs,
    retryAfterSeconds: config.retryAfterSeconds,
  });
  const app = createApp({
    logger,
    metrics,
    keys: createKeyVerifier(config.apiKeys),
    ids: createIdMinter(config.idSigningSecrets),
    enqueuer,
    idempotency: createIdempotencyStore({ redis, prefix: `feedback-ingest:${config.queueName}`, ttlSeconds: config.idempotencyTtlSeconds, pendingTtlSeconds: config.idempotencyPendingTtlSeconds }),
    backlog,
    bodyLimitBytes: config.bodyLimitBytes,
    retryAfterSeconds: config.retryAfterSeconds,
  });

  // Redis may be down at start: the API still starts (answering 503) and recovers by itself.
  redis.once('ready', () => void checkEvictionPolicy(redis, logger));

  const server = createServer(app.callback());
  // Slow clients (slowloris) are cut off: headers must arrive within the headers timeout, the
  // whole request within the request timeout.
  server.headersTimeout = config.httpHeadersTimeoutMs;
  server.requestTimeout = config.httpRequestTimeoutMs;
  server.keepAliveTimeout = config.httpKeepAliveTimeoutMs;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  logger.info({ port, queue: config.queueName }, 'api listening');

  let closing: Promise<void> | undefined;
  return {
    server,
    port,
    queue,
    redis,
    close() {
      closing ??= (async () => {
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeIdleConnections();
        await closed;
        await enqueuer.drain();
        backlog.stop();
        await queue.close();
        await redis.quit().catch(() => redis.disconnect());
      })();
      return closing;
    },
  };
}
