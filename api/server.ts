import { randomUUID } from 'node:crypto';
import { createServer, STATUS_CODES, type Server } from 'node:http';
import type { Duplex } from 'node:stream';
import type { AddressInfo } from 'node:net';
import type { MongoClient } from 'mongodb';
import type { Config } from '../shared/config.js';
import { ErrorCode } from '../shared/errors.js';
import { createIdMinter } from '../shared/ids.js';
import type { Logger } from '../shared/logger.js';
import { createWriteQueues, type WriteQueue, type WriteQueues } from '../shared/queue.js';
import { checkEvictionPolicy, checkPersistence, createRedis, type RedisClient } from '../shared/redis.js';
import { appKeyPrefix, webhookLeaseKey } from '../shared/redis-keys.js';
import { waitForReplicas } from '../shared/replication.js';
import { createApp } from './app.js';
import { createBacklogMonitor } from './backlog.js';
import { assertDevKeyOnLoopback } from './dev-key-guard.js';
import { createBatchingEnqueuer } from './enqueuer.js';
import { createQueueShardHealth } from './shard-probe.js';
import { createIdempotencyStore } from './idempotency.js';
import { createApiMetrics } from './metrics.js';
import { createRateLimiter } from './rate-limit.js';
import { chainKeyVerifiers, createKeyVerifier } from './key-verifier.js';
import { createKeyStore } from './key-store.js';
import { createDeadLetterAdmin } from '../shared/dead-letter-admin.js';
import { erasureCollection } from '../shared/erasures.js';
import { createDatasetAdmin } from '../shared/dataset-admin.js';
import { COLLECTIONS, createMongo, primaryDb } from '../shared/mongo.js';
import { logConnections } from '../shared/redact-url.js';
import { createDatasetGate } from './dataset-gate.js';
import { createDatasetStore } from './dataset-store.js';
import { createRecordReader } from './reads.js';
import { createAnnotationReader } from './annotation-reads.js';
import { createOrderClock } from '../shared/order-clock.js';
import { createOrderFloor } from './order-floor.js';
import { createFeedbackTokens } from './feedback-tokens.js';
import { createWebhookAdmin } from '../shared/webhook-admin.js';
import { createDeliveryLeases } from '../shared/webhook-leases.js';

/** How often each API process persists the highest acceptance order it minted, ms. */
const ORDER_FLOOR_PERSIST_MS = 1_000;

export interface ApiServer {
  readonly server: Server;
  readonly port: number;
  readonly queues: WriteQueues;
  /** The queue of shard 0: the whole write queue unless `QUEUE_SHARDS` > 1 (tests inspect it). */
  readonly queue: WriteQueue;
  readonly redis: RedisClient;
  /** The API's MongoDB client (keys, dead letters, reads): tests observe its commands (`monitorCommands` in MONGODB_URI). */
  readonly mongo: MongoClient;
  /** Stops accepting, answers what is in flight, flushes queued writes, closes Redis. */
  close(): Promise<void>;
}

/** Builds everything the API needs from `config` and listens. */
export async function startApi(config: Config, logger: Logger): Promise<ApiServer> {
  // Before any connection is opened: nothing to close when it refuses.
  assertDevKeyOnLoopback(config);
  logConnections(logger, config);
  if (config.apiKeys.length === 0) logger.warn('API_KEYS is empty: every write will be refused with 401');
  if (config.idSigningSecretIsDefault) logger.warn('ID_SIGNING_SECRETS is not set: using the development secret (set it in production)');
  const redis = createRedis(config, 'producer', logger);
  const queues = createWriteQueues(config, redis);
  // Without a listener BullMQ prints its connection errors to stderr with console.error (outside
  // the logger). The connection's own errors are already logged by createRedis.
  for (const { queue } of queues.shards) queue.on('error', (err) => logger.debug({ err: err.message }, 'queue error'));
  // /metrics reads the queue's depth on a connection of its own whose commands time out after
  // ENQUEUE_TIMEOUT_MS: a slow Redis delays a scrape by that at most, and never queues behind writes.
  const scrapeRedis = createRedis(config, 'producer', logger, { commandTimeout: config.enqueueTimeoutMs });
  const scrapeQueues = createWriteQueues(config, scrapeRedis);
  for (const { queue } of scrapeQueues.shards) queue.on('error', (err) => logger.debug({ err: err.message }, 'queue error'));
  const metrics = createApiMetrics({ defaultMetrics: true, queueJobCounts: (...states) => scrapeQueues.counts(...states) });
  // MongoDB serves the stored API keys (loaded in the background, never per request), the
  // dead-letter tools and the read endpoints; writes never touch it.
  const mongo = createMongo(config);
  const keyStore = createKeyStore({ db: mongo.db, refreshMs: config.apiKeysRefreshMs, logger });
  const keys = chainKeyVerifiers(createKeyVerifier(config.apiKeys, { adminNames: config.adminApiKeyNames, readNames: config.readApiKeyNames }), keyStore);
  const ids = createIdMinter(config.idSigningSecrets);
  const datasetAdmin = createDatasetAdmin({ db: mongo.db });
  const datasetStore = createDatasetStore({ admin: datasetAdmin, ids, refreshMs: config.datasetsRefreshMs, logger });
  const records = mongo.db.collection<{ _id: string; feedback_dataset_id: string }>(COLLECTIONS.records);
  const datasetGate = createDatasetGate({
    registry: datasetStore,
    ids,
    mode: config.datasets,
    retryAfterSeconds: config.retryAfterSeconds,
    // Only when two defined datasets share a fingerprint (rare); bounded like any MongoDB call here.
    recordDataset: async (recordId) => {
      const doc = await records.findOne({ _id: recordId }, { projection: { feedback_dataset_id: 1 }, timeoutMS: config.mongodbTimeoutMs }).catch(() => null);
      return doc?.feedback_dataset_id;
    },
  });
  const backlog = createBacklogMonitor({ queues, maxJobs: config.backlogMaxJobs, pollMs: config.backlogPollMs, logger, timeoutMs: config.enqueueTimeoutMs });
  const clock = createOrderClock(config.orderClockNode === undefined ? {} : { node: config.orderClockNode });
  const orderFloor = createOrderFloor({ db: primaryDb(mongo), clock, logger, persistMs: ORDER_FLOOR_PERSIST_MS });
  const health = config.shardReroute && queues.shards.length > 1 ? createQueueShardHealth({ queues, redis, config, logger, metrics }) : undefined;
  const enqueuer = createBatchingEnqueuer({
    queues,
    ...(health === undefined ? {} : { health }),
    replicaAck: { min: config.redisMinReplicasAck, confirm: (shard) => waitForReplicas(redis, shard.shard, config.redisMinReplicasAck, config.redisReplicaAckTimeoutMs) },
    logger,
    metrics,
    clock,
    maxItems: config.batchMaxItems,
    maxBytes: config.batchMaxBytes,
    maxInFlight: config.batchMaxInFlight,
    maxPendingWrites: config.enqueueMaxPendingWrites,
    maxPendingBytes: config.enqueueMaxPendingBytes,
    timeoutMs: config.enqueueTimeoutMs,
    retryAfterSeconds: config.retryAfterSeconds,
    compression: config.queueCompression,
  });
  /** Everything but the server, in the order writes need: queued writes flushed before Redis closes. */
  const closeConnections = async () => {
    await enqueuer.drain();
    health?.close();
    await orderFloor.close();
    backlog.stop();
    await queues.close();
    await scrapeQueues.close();
    await redis.quit().catch(() => redis.disconnect());
    await scrapeRedis.quit().catch(() => scrapeRedis.disconnect());
    await keyStore.close();
    await datasetStore.close();
    await mongo.close();
  };
  /** Builds the app, loads what it needs and listens; the caller closes the connections if it throws. */
  const bind = async (): Promise<ApiServer> => {
    const app = createApp({
      logger,
      metrics,
      keys,
      ids,
      enqueuer,
      idempotency: createIdempotencyStore({ redis, prefix: appKeyPrefix(config), ttlSeconds: config.idempotencyTtlSeconds, pendingTtlSeconds: config.idempotencyPendingTtlSeconds }),
      backlog,
      bodyLimitBytes: config.bodyLimitBytes,
      batchRequestMaxItems: config.batchRequestMaxItems,
      batchRequestMaxBytes: config.batchRequestMaxBytes,
      retryAfterSeconds: config.retryAfterSeconds,
      dashboardQueues: queues,
      ...(health === undefined ? {} : { shardAnswers: (index: number) => health.healthy(index) }),
      reader: createRecordReader({ db: mongo.db }),
      readTimeoutMs: config.mongodbTimeoutMs,
      annotation: createAnnotationReader({ db: mongo.db }),
      erasures: erasureCollection(mongo.db),
      datasets: { gate: datasetGate, admin: datasetAdmin, registry: datasetStore, reload: () => datasetStore.refresh() },
      deadLetters: createDeadLetterAdmin({ db: mongo.db, queues, compression: config.queueCompression }),
      webhooks: { admin: createWebhookAdmin({ db: primaryDb(mongo), leases: createDeliveryLeases({ redis, key: (id) => webhookLeaseKey(config, id) }) }), allowInsecure: config.webhooksAllowInsecure, timeoutMs: config.webhookTimeoutMs },
      feedbackTokens: {
        tokens: createFeedbackTokens({ secrets: config.idSigningSecrets, defaultTtlSeconds: config.feedbackTokenTtlSeconds, maxTtlSeconds: config.feedbackTokenMaxTtlSeconds }),
        maxTtlSeconds: config.feedbackTokenMaxTtlSeconds,
      },
      corsOrigins: config.corsOrigins,
      rateLimit: createRateLimiter({ redis, prefix: appKeyPrefix(config), defaultPerMinute: config.rateLimitPerMinute, timeoutMs: config.enqueueTimeoutMs, logger, metrics }),
    });

    // Redis may be down at start: the API still starts (answering 503) and recovers by itself.
    redis.once('ready', () => {
      void checkEvictionPolicy(redis, logger);
      void checkPersistence(redis, logger);
    });
    // Bounded: with MongoDB down the API starts with the API_KEYS keys and loads the others later.
    await Promise.all([keyStore.start(config.mongodbTimeoutMs), orderFloor.start(config.mongodbTimeoutMs), datasetStore.start(config.mongodbTimeoutMs)]);

    // Node enforces the two timeouts below only when it sweeps its connections, every
    // connectionsCheckingInterval (30 s by default): a slowloris would get up to 30 s more.
    const sweepMs = Math.max(250, Math.min(5_000, Math.floor(Math.min(config.httpHeadersTimeoutMs, config.httpRequestTimeoutMs) / 2)));
    const handle = app.callback();
    // Once closing, every answer ends its connection (`Connection: close`): server.close() closes
    // only idle connections, and a keep-alive connection kept busy (a load balancer's pool) would
    // be served until SHUTDOWN_TIMEOUT_MS, then cut mid-request.
    let draining = false;
    const server = createServer({ connectionsCheckingInterval: sweepMs }, (req, res) => {
      if (draining) res.shouldKeepAlive = false;
      void handle(req, res);
    });
    // Slow clients (slowloris) are cut off: headers must arrive within the headers timeout, the
    // whole request within the request timeout.
    server.headersTimeout = config.httpHeadersTimeoutMs;
    server.requestTimeout = config.httpRequestTimeoutMs;
    server.keepAliveTimeout = config.httpKeepAliveTimeoutMs;
    server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => answerClientError(err, socket, logger));
    try {
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(config.port, config.host, () => {
          server.off('error', reject);
          resolve();
        });
      });
    } catch (err) {
      throw new ListenError(config.host, config.port, err as NodeJS.ErrnoException);
    }
    // Only once bound: a process that says it listens does.
    const port = (server.address() as AddressInfo).port;
    logger.info({ host: config.host, port, queue: config.queueName, shards: queues.shards.length, cluster: config.redisClusterNodes.length > 0, min_replicas_ack: config.redisMinReplicasAck, order_node: clock.node, datasets: config.datasets, defined_datasets: datasetStore.size }, 'api listening');

    let closing: Promise<void> | undefined;
    return {
      server,
      port,
      queues,
      queue: queues.shards[0]!.queue,
      redis,
      mongo: mongo.client,
      close() {
        closing ??= (async () => {
          draining = true;
          const closed = new Promise<void>((resolve) => server.close(() => resolve()));
          // Answers in flight now were promised keep-alive: their connections are closed as they
          // turn idle (a request that arrives first gets `Connection: close` above).
          server.closeIdleConnections();
          const sweep = setInterval(() => server.closeIdleConnections(), 100).unref();
          await closed.finally(() => clearInterval(sweep));
          await closeConnections();
        })();
        return closing;
      },
    };
  };
  // A failure from here on (a bug building the app, a port in use) closes the connections above,
  // so that no open handle keeps the process, or a test run, alive.
  try {
    return await bind();
  } catch (err) {
    await closeConnections();
    throw err;
  }
}

const LISTEN_ERRORS: Readonly<Record<string, string>> = {
  EADDRINUSE: 'address already in use',
  EACCES: 'permission denied',
  EADDRNOTAVAIL: 'address not available on this host',
};

/** The API could not bind its port; `message` is the one line main.ts prints before exiting 1. */
export class ListenError extends Error {
  readonly code: string | undefined;
  constructor(host: string, port: number, cause: NodeJS.ErrnoException) {
    const reason = (cause.code === undefined ? undefined : LISTEN_ERRORS[cause.code]) ?? cause.message;
    super(`cannot listen on ${host}:${port}: ${reason}`, { cause });
    this.name = 'ListenError';
    this.code = cause.code;
  }
}

/** Node's parser error codes that mean "headers too large" or "too slow". */
function clientErrorCode(err: NodeJS.ErrnoException): ErrorCode {
  if (err.code === 'HPE_HEADER_OVERFLOW') return 'headers_too_large';
  if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT' || err.code === 'HPE_HEADERS_TIMEOUT') return 'request_timeout';
  return 'bad_request';
}

/**
 * A request Node's HTTP parser refuses (malformed, too slow, headers too large) never reaches Koa.
 * Node would answer a bare "400 Bad Request"; this answers in the contract's error shape, with an
 * X-Request-Id, and closes the connection (the parser cannot resynchronise on it).
 */
function answerClientError(err: NodeJS.ErrnoException, socket: Duplex, logger: Logger): void {
  // A response already started on this socket cannot be followed by another.
  const inProgress = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (err.code === 'ECONNRESET' || !socket.writable || inProgress?.headersSent === true) {
    socket.destroy();
    return;
  }
  const code = clientErrorCode(err);
  const { status } = ErrorCode[code];
  const requestId = randomUUID();
  const message = code === 'bad_request' ? 'the request is not valid HTTP/1.1' : code === 'request_timeout' ? 'the request did not arrive in time' : 'the request headers are too large';
  const body = JSON.stringify({ error: { code, message } });
  logger.info({ request_id: requestId, code, parser_error: err.code }, 'client error');
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nX-Request-Id: ${requestId}\r\nConnection: close\r\n\r\n${body}`,
  );
}
