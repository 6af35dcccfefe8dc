import { createServer, type Server } from 'node:http';
import type { Config } from '../shared/config.js';
import { createDeadLetterStore } from '../shared/dead-letters.js';
import type { Logger } from '../shared/logger.js';
import { createMongo, primaryDb, socketTimeoutMs, type MongoHandle } from '../shared/mongo.js';
import { sleep } from '../shared/process.js';
import { logConnections } from '../shared/redact-url.js';
import { checkEvictionPolicy, checkPersistence, createRedis, type RedisClient } from '../shared/redis.js';
import { warnOfStrandedShards } from '../shared/stranded-shards.js';
import { queueShards } from '../shared/redis-keys.js';
import { createShardConsumer, createShardWorker, type ShardConsumer } from '../shared/queue.js';
import { createShardActivity, createShardWatch, watchShards, type WatchedShard } from './shard-watch.js';
import { isTransientMongoError, TransientStoreError } from './errors.js';
import { ensureIndexes } from './indexes.js';
import { createWorkerMetrics, type WorkerMetrics } from './metrics.js';
import { concurrencyPerShard, createJobSizeAverage } from './concurrency.js';
import { createWriteProcessor, type JobSummary } from './processor.js';
import { createFeedbackWriter } from './writer.js';
import { createCompletionRules } from './completion-rules.js';
import { createCompletionTracker, type RecordStatusChange } from './completion.js';
import { createErasureGuard, type ErasureHooks, type OnErased } from './erasure-guard.js';
import { createEraser } from './erasures.js';
import { createOutboxEraser } from './erasure-outbox.js';
import { createIdMinter } from '../shared/ids.js';
import { appKeyPrefix } from '../shared/redis-keys.js';
import { startWebhooks, type WorkerWebhooks } from './webhooks.js';
import { clientAnswers, createStoreReconnector, probeStore } from './store-reconnect.js';

export interface WorkerRuntime {
  /** The BullMQ worker of shard 0: the only one unless `QUEUE_SHARDS` > 1 (tests inspect it). */
  readonly worker: ShardConsumer<JobSummary>['worker'];
  /** One BullMQ worker per shard of the write queue. */
  readonly workers: readonly ShardConsumer<JobSummary>['worker'][];
  readonly mongo: MongoHandle;
  readonly redis: RedisClient;
  readonly metrics: WorkerMetrics;
  readonly metricsServer: Server | undefined;
  /** Webhook events and deliveries (worker/webhooks.ts). */
  readonly webhooks: WorkerWebhooks;
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

/** Creates indexes, waiting while MongoDB is not up yet. */
async function prepareStore(mongo: MongoHandle, logger: Logger): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await ensureIndexes(mongo.db);
      return;
    } catch (err) {
      // Anything but "not reachable" (an index that conflicts with an existing one…) will not heal
      // by waiting: the caller stops with this one line.
      if (!(err instanceof TransientStoreError) && !isTransientMongoError(err)) throw err;
      logger.warn({ err: (err as Error).message, attempt }, 'MongoDB not ready; retrying');
      await sleep(Math.min(5_000, 250 * attempt));
    }
  }
}

interface WorkerOptions {
  /** A MongoDB connection of the caller's (the bench counts its commands); closing it stays with the caller. */
  readonly mongo?: MongoHandle;
  /** Node's default process metrics on the worker's registry. Default true. */
  readonly defaultMetrics?: boolean;
  /** Told of the records whose completion status the worker changed, after the change is stored (worker/completion.ts). */
  readonly onRecordStatusChanged?: (changes: readonly RecordStatusChange[]) => void | Promise<void>;
  /**
   * Called with the response documents erasures remove, each with the erasure that removes it,
   * after they are removed (the sweeps of worker/erasures.ts and the store rounds of
   * worker/erasure-guard.ts). A throw fails the job's attempt, which runs again but no longer finds
   * what was removed: the webhooks' `response.erased` are appended before the removal instead
   * (`ErasureHooks.removing`).
   */
  readonly onErased?: OnErased;
}

/** Prepares the store, then starts draining the queue. */
export async function startWorker(config: Config, logger: Logger, options: WorkerOptions = {}): Promise<WorkerRuntime> {
  logConnections(logger, config);
  const ownMongo = options.mongo === undefined;
  const mongo = options.mongo ?? createMongo(config);
  await prepareStore(mongo, logger).catch(async (err: unknown) => {
    if (ownMongo) await mongo.close();
    throw err;
  });
  const completionRules = createCompletionRules({ db: primaryDb(mongo), logger });
  const redis = createRedis(config, 'worker', logger);
  void checkEvictionPolicy(redis, logger);
  void checkPersistence(redis, logger);
  void warnOfStrandedShards(config, redis, logger);
  const shards = queueShards(config);
  const metrics = createWorkerMetrics({ defaultMetrics: options.defaultMetrics ?? true });
  // Deliveries keep to a share while the writer works through a backlog (worker/webhook-dispatcher.ts); the writer is built below.
  let writerBusy: () => boolean = () => false;
  const webhooks = await startWebhooks(config, { db: primaryDb(mongo), redis, logger, registry: metrics.registry, writing: () => writerBusy() });
  const completion = createCompletionTracker({
    db: primaryDb(mongo),
    rules: completionRules,
    onCompleting: webhooks.completedRecords,
    ...(options.onRecordStatusChanged === undefined ? {} : { onStatusChanged: options.onRecordStatusChanged }),
  });
  // What erasures remove: announced to the webhooks before it goes; after, the records'
  // completion is counted again (a submitted response erased may take a record back to pending),
  // then the caller is told (options.onErased).
  // The outbox's events that carry the erased data go before the data does (worker/erasure-outbox.ts).
  // The writer is built below, after the hooks it takes.
  let forgetRecords: (recordIds: readonly string[]) => void = () => undefined;
  const outboxEraser = createOutboxEraser(primaryDb(mongo), webhooks.fanOutLock);
  const erasureHooks: ErasureHooks = {
    removing: async (removing) => {
      await webhooks.erasedResponses(removing);
      await outboxEraser.responses(removing);
    },
    removingRecords: (recordIds) => outboxEraser.records(recordIds),
    // After they are gone: a round that looks one of them up from now on reads the store, not
    // this process's memory (a round that read it just before the delete remembered it).
    removedRecords: (recordIds) => forgetRecords(recordIds),
    removed: async (removed) => {
      await completion.recount(new Map(removed.map(({ doc }) => [doc.feedback_record_id, doc.feedback_dataset_id])));
      await options.onErased?.(removed);
    },
  };
  const eraser = createEraser({ db: primaryDb(mongo), redis, appKeyPrefix: appKeyPrefix(config), ids: createIdMinter(config.idSigningSecrets), logger, settleMs: config.erasureSettleMs, ...erasureHooks });
  // Twice the sockets' timeout: every store call of a round has had the chance to time out on its own.
  const writer = createFeedbackWriter({ db: primaryDb(mongo), logger, roundDeadlineMs: 2 * socketTimeoutMs(config), completion, historyMax: config.responseHistoryMax, erasures: createErasureGuard({ db: primaryDb(mongo), ...erasureHooks }), events: webhooks.roundEvents });
  writerBusy = () => writer.busy();
  forgetRecords = (recordIds) => writer.forgetRecords(recordIds);
  // The store is shared by every shard: when it is down, every shard's queue waits.
  // A client the driver never reconnects gets a new topology (worker/store-reconnect.ts); only our own client.
  const reconnector = ownMongo ? createStoreReconnector({ client: mongo.client, probe: () => probeStore(config), clientAnswers: () => clientAnswers(mongo.client, config.mongodbTimeoutMs), logger }) : undefined;
  const pauseQueues = async (ms: number) => {
    await Promise.all(consumers.map((c) => c.queue.rateLimit(ms)));
  };
  // The process holds about WORKER_WRITES_IN_HAND writes, as many jobs as that takes at their
  // average size (at most WORKER_CONCURRENCY, at least one per shard, so that every shard
  // drains); the writer merges the jobs of every shard in hand (worker/concurrency.ts).
  const limits = { maxJobs: config.workerConcurrency, writesInHand: config.workerWritesInHand, shards: shards.length };
  // It starts at 16 jobs (the old fixed default) and adapts as jobs finish, so a burst of large jobs never finds it holding hundreds.
  const jobSize = createJobSizeAverage(config.workerWritesInHand / 16);
  const perShard = concurrencyPerShard(jobSize.value, limits);
  const workerOptions = {
    concurrency: perShard,
    lockDuration: config.jobLockMs,
    maxStalledCount: config.jobMaxStalled,
    stalledInterval: config.jobStalledIntervalMs,
  };
  type ShardWorker = ShardConsumer<JobSummary>['worker'];
  /** One shard's queue and its current BullMQ worker, replaced when stuck (worker/shard-watch.ts). */
  type Consumer = WatchedShard<ShardWorker> & Pick<ShardConsumer<JobSummary>, 'shard' | 'queue'>;
  const consumers: Consumer[] = shards.map((shard) => {
    const processor = createWriteProcessor({
      writer,
      eraser,
      deadLetters: createDeadLetterStore(mongo.db),
      logger: shards.length > 1 ? logger.child({ shard: shard.index }) : logger,
      metrics,
      queueName: shard.label,
      storeRetryMaxDelayMs: config.storeRetryMaxDelayMs,
      pauseQueue: pauseQueues,
      ...(reconnector === undefined ? {} : { storeOutcome: (ok: boolean) => (ok ? reconnector.succeeded() : reconnector.failed()) }),
      maxInflatedBytes: maxInflatedBytes(config),
    });
    const activity = createShardActivity();
    const run = (job: Parameters<typeof processor.process>[0]) => activity.track(() => processor.process(job));
    const attach = (worker: ShardWorker) => {
      worker.on('failed', (job, err) => {
        logger.warn({ job_id: job?.id, shard: shard.index, attempts_made: job?.attemptsMade, err: err.message }, 'job attempt failed');
        void processor.onFailed(job, err);
      });
      worker.on('error', (err) => logger.warn({ err: err.message, shard: shard.index }, 'worker error'));
      worker.on('completed', (_job, summary) => {
        const next = concurrencyPerShard(jobSize.observe(summary.records + summary.responses + summary.suggestions + summary.stale + summary.dead_lettered), limits);
        for (const c of consumers) if (c.worker.concurrency !== next) c.worker.concurrency = next;
      });
      return worker;
    };
    const first = createShardConsumer<JobSummary>(config, redis, shard, run, workerOptions);
    first.queue.on('error', (err) => logger.debug({ err: err.message }, 'queue error'));
    return {
      shard,
      queue: first.queue,
      worker: attach(first.worker),
      activity,
      watch: createShardWatch(config.workerStuckMs),
      spawn: (old) => attach(createShardWorker<JobSummary>(config, redis, shard, run, { ...workerOptions, concurrency: old.concurrency })),
    };
  });
  const queues = consumers.map((c) => c.queue);
  const stopWatch = config.workerStuckMs > 0 ? watchShards(consumers, { stuckMs: config.workerStuckMs, timeoutMs: config.enqueueTimeoutMs * 5, logger, restarts: metrics.consumerRestarts }) : () => undefined;

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
  logger.info({ queue: config.queueName, shards: shards.length, concurrency: perShard * shards.length}, 'worker started');

  let closing: Promise<void> | undefined;
  return {
    get worker() {
      return consumers[0]!.worker;
    },
    get workers() {
      return consumers.map((c) => c.worker);
    },
    mongo,
    redis,
    metrics,
    metricsServer,
    webhooks,
    close() {
      closing ??= (async () => {
        stopWatch();
        await Promise.all(consumers.map((c) => c.worker.close()));
        await reconnector?.close();
        await webhooks.close();
        metricsServer?.close();
        await Promise.all(queues.map((q) => q.close()));
        if (ownMongo) await mongo.close();
        await redis.quit().catch(() => redis.disconnect());
      })();
      return closing;
    },
  };
}
