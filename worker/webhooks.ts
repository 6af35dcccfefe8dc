import { Queue, Worker } from 'bullmq';
import type { Db } from 'mongodb';
import { Counter, type Registry } from 'prom-client';
import type { Config } from '../shared/config.js';
import type { Logger } from '../shared/logger.js';
import type { RedisClient } from '../shared/redis.js';
import { webhookFanOutLockKey, webhookLeaseKey, webhookQueue } from '../shared/redis-keys.js';
import { createDeliveryLeases } from '../shared/webhook-leases.js';
import type { RecordCompletion } from './completion.js';
import { createCompletionEvents } from './completion-events.js';
import type { OnErased } from './erasure-guard.js';
import { createErasureEvents } from './erasure-events.js';
import { createEventOutbox, type EventOutbox } from './event-outbox.js';
import { createFanOutLock, type FanOutLock } from './fan-out-lock.js';
import { upgradeOutbox } from './outbox-upgrade.js';
import { createRoundEvents, type RoundEvents } from './round-events.js';
import { createDeliveryProcessor, createSendLimit, deliveryBackoffMs, type DeliveryOutcome } from './webhook-delivery.js';
import { createWebhookDispatcher, type DeliveryJobData, type WebhookDispatcher } from './webhook-dispatcher.js';
import { createWebhookFanOut } from './webhook-fan-out.js';
import { createWebhookSubscriptions, type WebhookSubscriptions } from './webhook-subscriptions.js';

/** The worker's webhook side: the outbox its store rounds append to, the dispatcher and the delivery queue's worker. */
export interface WorkerWebhooks {
  /** For the writer: the events of each store round. */
  readonly roundEvents: RoundEvents;
  /** For the erasures (`ErasureHooks.removing`): `response.erased` of the responses about to be removed. */
  readonly erasedResponses: OnErased;
  /** For the completion recount (`onCompleting`): `record.completed` of the records a round completed. */
  readonly completedRecords: (completions: readonly RecordCompletion[]) => Promise<void>;
  /** The outbox every event goes through. */
  readonly outbox: EventOutbox;
  /** Held while events move from their batches into the outbox: an erasure removing events takes it too (worker/erasure-outbox.ts). */
  readonly fanOutLock: FanOutLock;
  readonly dispatcher: WebhookDispatcher;
  readonly subscriptions: WebhookSubscriptions;
  readonly queue: Queue<DeliveryJobData>;
  readonly worker: Worker<DeliveryJobData>;
  close(): Promise<void>;
}

const BACKOFF_TYPE = 'webhook';

export async function startWebhooks(config: Config, deps: { readonly db: Db; readonly redis: RedisClient; readonly logger: Logger; readonly registry: Registry; readonly writing?: () => boolean }): Promise<WorkerWebhooks> {
  const logger = deps.logger.child({ component: 'webhooks' });
  const deliveries = new Counter({
    name: 'feedback_webhook_deliveries_total',
    help: 'Webhook deliveries by endpoint and outcome (appended, append_rejected, delivered, attempt_failed, failed, superseded).',
    labelNames: ['endpoint_id', 'outcome'],
    registers: [deps.registry],
  });
  const count = (endpointId: string, outcome: DeliveryOutcome | 'appended' | 'append_rejected', n = 1) => {
    if (outcome !== 'skipped') deliveries.inc({ endpoint_id: endpointId, outcome }, n);
  };
  const subscriptions = createWebhookSubscriptions({ db: deps.db, refreshMs: config.webhookRefreshMs, logger });
  await subscriptions.refresh();
  // Deliveries an earlier release appended wait under keys this dispatcher does not read until upgraded; a failure leaves them for the next start.
  await upgradeOutbox(deps.db, logger).catch((err: unknown) => logger.warn({ err: (err as Error).message }, 'could not upgrade the webhook outbox; deliveries of an earlier release wait until the next start'));

  const { name, prefix } = webhookQueue(config);
  const queue = new Queue<DeliveryJobData>(name, { connection: deps.redis, prefix });
  queue.on('error', (err) => logger.debug({ err: err.message }, 'webhook queue error'));
  const leases = createDeliveryLeases({ redis: deps.redis, key: (endpointId) => webhookLeaseKey(config, endpointId) });
  const fanOutLock = createFanOutLock({ redis: deps.redis, key: webhookFanOutLockKey(config) });
  const dispatcher = createWebhookDispatcher({
    db: deps.db,
    queue,
    subscriptions,
    leases,
    fanOut: createWebhookFanOut({ db: deps.db, lock: fanOutLock, logger }),
    logger,
    maxInFlight: config.webhookMaxInFlight,
    ...(deps.writing === undefined ? {} : { writing: deps.writing }),
    burstYieldMs: config.webhookBurstYieldMs,
    intervalMs: config.webhookDispatchMs,
    keepDeliveredMs: config.webhookKeepDeliveredS * 1000,
    // The outcome of every delivery is in MongoDB: Redis keeps no finished job.
    jobOptions: { attempts: config.webhookMaxAttempts, backoff: { type: BACKOFF_TYPE }, removeOnComplete: true, removeOnFail: true },
  });
  const outbox = createEventOutbox({ db: deps.db, subscriptions, logger, onAppended: () => dispatcher.kick(), onOutcome: count });
  const processor = createDeliveryProcessor({
    db: deps.db,
    subscriptions,
    leases,
    policy: { allowInsecure: config.webhooksAllowInsecure },
    timeoutMs: config.webhookTimeoutMs,
    limit: createSendLimit(config.webhookConcurrency),
    onOutcome: count,
  });
  const worker = new Worker<DeliveryJobData>(name, async (job) => {
    try {
      return await processor.process(job);
    } finally {
      // The next events of the records delivered may go now (also when others of the job failed).
      dispatcher.kick();
    }
  }, {
    connection: deps.redis,
    prefix,
    concurrency: config.webhookConcurrency,
    // A delivery outlives its timeout by little; a dead worker's delivery is taken up again soon.
    lockDuration: Math.max(30_000, config.webhookTimeoutMs * 3),
    settings: { backoffStrategy: (attemptsMade) => deliveryBackoffMs(attemptsMade, config.webhookBackoffMs, config.webhookBackoffMaxMs) },
  });
  worker.on('error', (err) => logger.warn({ err: err.message }, 'webhook worker error'));
  worker.on('failed', (job, err) => {
    if (job === undefined) return;
    logger.info({ claim: job.data.claim, deliveries: job.data.deliveries.length, attempts_made: job.attemptsMade, err: err.message }, 'webhook delivery attempt failed');
    if (job.attemptsMade < (job.opts.attempts ?? 1)) return;
    void processor.onFinalFailure(job, err).then(
      () => dispatcher.kick(),
      (e: unknown) => logger.error({ claim: job.data.claim, err: (e as Error).message }, 'could not mark webhook deliveries failed'),
    );
  });
  logger.info({ queue: name, endpoints: subscriptions.all().length }, 'webhooks started');

  return {
    roundEvents: createRoundEvents({ db: deps.db, outbox }),
    erasedResponses: createErasureEvents({ outbox }),
    completedRecords: createCompletionEvents({ db: deps.db, outbox }),
    outbox,
    fanOutLock,
    dispatcher,
    subscriptions,
    queue,
    worker,
    async close() {
      await dispatcher.close();
      await worker.close();
      await queue.close();
      await subscriptions.close();
    },
  };
}
