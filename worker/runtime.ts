import { createServer, type Server } from 'node:http';
import { Queue, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Config } from '../shared/config.js';
import { createDeadLetterStore } from '../shared/dead-letters.js';
import type { Logger } from '../shared/logger.js';
import { createMongo, type MongoHandle } from '../shared/mongo.js';
import { sleep } from '../shared/process.js';
import { checkEvictionPolicy, checkPersistence, createRedis } from '../shared/redis.js';
import { isTransientMongoError, TransientStoreError } from './errors.js';
import { ensureIndexes } from './indexes.js';
import { createWorkerMetrics, type WorkerMetrics } from './metrics.js';
import { createWriteProcessor } from './processor.js';
import { detectStoreProfile, type StoreProfile } from '../shared/store-profile.js';
import { createFeedbackWriter } from './writer.js';

export interface WorkerRuntime {
  readonly worker: Worker;
  readonly mongo: MongoHandle;
  readonly redis: Redis;
  readonly metrics: WorkerMetrics;
  readonly metricsServer: Server | undefined;
  readonly profile: StoreProfile;
  /** Finishes the jobs in hand (bounded by the caller), then closes every connection. */
  close(): Promise<void>;
}

/**
 * Largest inflated job the worker accepts, bytes. A job carries bodies of up to BATCH_MAX_BYTES
 * (or one body of up to BODY_LIMIT_BYTES); re-serialised, JSON grows at most about five-fold
 * (`1e20` becomes 21 digits), plus the metadata of each write.
 */
function maxInflatedBytes(config: Pick<Config, 'batchMaxBytes' | 'bodyLimitBytes' | 'batchMaxItems'>): number {
  return 6 * Math.max(config.batchMaxBytes, config.bodyLimitBytes) + config.batchMaxItems * 4096;
}

/** Reads the store's profile and creates indexes, waiting while MongoDB is not up yet. */
async function prepareStore(mongo: MongoHandle, config: Config, logger: Logger): Promise<StoreProfile> {
  for (let attempt = 1; ; attempt++) {
    try {
      const profile = await detectStoreProfile(mongo.db, config.storeProfile);
      await ensureIndexes(mongo.db);
      return profile;
    } catch (err) {
      // Anything but "not reachable" (an index that conflicts with an existing one…) will not heal
      // by waiting: the caller stops with this one line.
      if (!(err instanceof TransientStoreError) && !isTransientMongoError(err)) throw err;
      logger.warn({ err: (err as Error).message, attempt }, 'MongoDB not ready; retrying');
      await sleep(Math.min(5_000, 250 * attempt));
    }
  }
}

export interface WorkerOptions {
  /** A MongoDB connection of the caller's (the bench counts its commands); closing it stays with the caller. */
  readonly mongo?: MongoHandle;
  /** Node's default process metrics on the worker's registry. Default true. */
  readonly defaultMetrics?: boolean;
}

/** Prepares the store, then starts draining the queue. */
export async function startWorker(config: Config, logger: Logger, options: WorkerOptions = {}): Promise<WorkerRuntime> {
  const ownMongo = options.mongo === undefined;
  const mongo = options.mongo ?? createMongo(config);
  const profile = await prepareStore(mongo, config, logger).catch(async (err: unknown) => {
    if (ownMongo) await mongo.close();
    throw err;
  });
  const writer = createFeedbackWriter({ db: mongo.db, logger, profile, leaseMs: config.writeLeaseMs });
  const redis = createRedis(config, 'worker', logger);
  void checkEvictionPolicy(redis, logger);
  void checkPersistence(redis, logger);
  const queue = new Queue(config.queueName, { connection: redis });
  queue.on('error', (err) => logger.debug({ err: err.message }, 'queue error'));
  const metrics = createWorkerMetrics({ defaultMetrics: options.defaultMetrics ?? true });
  const processor = createWriteProcessor({
    writer,
    deadLetters: createDeadLetterStore(mongo.db),
    logger,
    metrics,
    queueName: config.queueName,
    storeRetryMaxDelayMs: config.storeRetryMaxDelayMs,
    pauseQueue: (ms) => queue.rateLimit(ms),
    maxInflatedBytes: maxInflatedBytes(config),
  });
  const worker = new Worker(config.queueName, (job, token) => processor.process(job, token), {
    connection: redis,
    concurrency: config.workerConcurrency,
    lockDuration: config.jobLockMs,
    maxStalledCount: config.jobMaxStalled,
    stalledInterval: config.jobStalledIntervalMs,
  });
  worker.on('failed', (job, err) => {
    logger.warn({ job_id: job?.id, attempts_made: job?.attemptsMade, err: err.message }, 'job attempt failed');
    void processor.onFailed(job, err);
  });
  worker.on('error', (err) => logger.warn({ err: err.message }, 'worker error'));

  let metricsServer: Server | undefined;
  if (config.workerMetricsPort > 0) {
    metricsServer = createServer((req, res) => {
      if (req.url !== '/metrics') {
        res.writeHead(404).end();
        return;
      }
      metrics.registry.metrics().then(
        (text) => res.writeHead(200, { 'Content-Type': metrics.registry.contentType }).end(text),
        () => res.writeHead(500).end(),
      );
    });
    // A port in use must not take the worker down: it keeps storing, without metrics.
    metricsServer.on('error', (err) => logger.error({ err: err.message, port: config.workerMetricsPort }, 'worker metrics server failed; metrics are off'));
    metricsServer.listen(config.workerMetricsPort);
  }
  logger.info({ queue: config.queueName, concurrency: config.workerConcurrency, store: profile.name }, 'worker started');

  let closing: Promise<void> | undefined;
  return {
    worker,
    mongo,
    redis,
    metrics,
    metricsServer,
    profile,
    close() {
      closing ??= (async () => {
        await worker.close();
        writer.close();
        metricsServer?.close();
        await queue.close();
        if (ownMongo) await mongo.close();
        await redis.quit().catch(() => redis.disconnect());
      })();
      return closing;
    },
  };
}
