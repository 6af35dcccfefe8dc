import { createServer, type Server } from 'node:http';
import { Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Config } from '../shared/config.js';
import { createDeadLetterStore } from '../shared/dead-letters.js';
import type { Logger } from '../shared/logger.js';
import { createMongo, type MongoHandle } from '../shared/mongo.js';
import { sleep } from '../shared/process.js';
import { checkEvictionPolicy, createRedis } from '../shared/redis.js';
import { createWorkerMetrics, type WorkerMetrics } from './metrics.js';
import { createWriteProcessor } from './processor.js';
import { createFeedbackWriter } from './writer.js';

export interface WorkerRuntime {
  readonly worker: Worker;
  readonly mongo: MongoHandle;
  readonly redis: Redis;
  readonly metrics: WorkerMetrics;
  readonly metricsServer: Server | undefined;
  /** Finishes the jobs in hand (bounded by the caller), then closes every connection. */
  close(): Promise<void>;
}

/** Creates indexes (waiting for MongoDB if it is not up yet), then starts draining the queue. */
export async function startWorker(config: Config, logger: Logger): Promise<WorkerRuntime> {
  const mongo = createMongo(config);
  const writer = createFeedbackWriter({ db: mongo.db, logger });
  for (let attempt = 1; ; attempt++) {
    try {
      await writer.ensureIndexes();
      break;
    } catch (err) {
      logger.warn({ err: (err as Error).message, attempt }, 'MongoDB not ready; retrying index creation');
      await sleep(Math.min(5_000, 250 * attempt));
    }
  }
  const metrics = createWorkerMetrics({ defaultMetrics: true });
  const processor = createWriteProcessor({
    writer,
    deadLetters: createDeadLetterStore(mongo.db),
    logger,
    metrics,
    queueName: config.queueName,
    storeRetryMaxDelayMs: config.storeRetryMaxDelayMs,
  });
  const redis = createRedis(config, 'worker', logger);
  void checkEvictionPolicy(redis, logger);
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
    metricsServer.listen(config.workerMetricsPort);
  }
  logger.info({ queue: config.queueName, concurrency: config.workerConcurrency }, 'worker started');

  let closing: Promise<void> | undefined;
  return {
    worker,
    mongo,
    redis,
    metrics,
    metricsServer,
    close() {
      closing ??= (async () => {
        await worker.close();
        metricsServer?.close();
        await mongo.close();
        await redis.quit().catch(() => redis.disconnect());
      })();
      return closing;
    },
  };
}
