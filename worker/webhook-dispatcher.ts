import type { Queue } from 'bullmq';
import type { Db } from 'mongodb';
import type { Logger } from '../shared/logger.js';
import { COLLECTIONS } from '../shared/mongo.js';
import type { DeliveryDoc } from '../shared/webhook-admin.js';
import type { WebhookSubscriptions } from './webhook-subscriptions.js';

/** The job of the delivery queue: which outbox document to send (its id is also the job id). */
export interface DeliveryJobData {
  readonly delivery_id: string;
  /** The record (ordering key) and its place, so that the delivery reads its document and any later delivered event of the record in one query. */
  readonly key: string;
  readonly seq: number;
  readonly rank: number;
}
export const DELIVERY_JOB_NAME = 'deliver';

/** How often deliveries marked `queued` are checked against Redis (a job lost with a Redis reset goes back to pending). */
const RECONCILE_EVERY_MS = 30_000;
/** Longest a pass asked for by a kick waits, gathering the kicks that come meanwhile. */
const KICK_DELAY_MS = 100;
/** How often delivered events older than the retention are deleted. */
const PRUNE_EVERY_MS = 60_000;

export interface WebhookDispatcher {
  /** Runs a pass soon (after a store round appended events). */
  kick(): void;
  /** One pass now (tests). */
  runOnce(): Promise<void>;
  close(): Promise<void>;
}

/**
 * Moves deliveries from the outbox (MongoDB) to the delivery queue (Redis), per endpoint at most
 * `maxInFlight` at once and at most one per record: the next event of a record is queued only
 * once the one before it is delivered, so a record's events (hence a response's) reach an
 * endpoint in their order, retries included. A record whose delivery failed for good holds its
 * later events (`held`) until the failed one is replayed.
 */
export function createWebhookDispatcher(options: {
  readonly db: Db;
  readonly queue: Queue<DeliveryJobData>;
  readonly subscriptions: WebhookSubscriptions;
  readonly logger: Logger;
  readonly maxInFlight: number;
  readonly intervalMs: number;
  readonly keepDeliveredMs: number;
  readonly jobOptions: Parameters<Queue<DeliveryJobData>['add']>[2];
}): WebhookDispatcher {
  const outbox = options.db.collection<DeliveryDoc>(COLLECTIONS.webhookOutbox);
  let running: Promise<void> | undefined;
  let again = false;
  let stopped = false;
  let lastReconcile = Date.now();
  let lastPrune = 0;

  async function dispatchEndpoint(endpointId: string): Promise<void> {
    const queued = await outbox.countDocuments({ endpoint_id: endpointId, status: 'queued' });
    const free = options.maxInFlight - queued;
    if (free <= 0) return;
    const pending = await outbox
      .find({ endpoint_id: endpointId, status: 'pending' }, { projection: { _id: 1, key: 1, seq: 1, rank: 1 } })
      .sort({ seq: 1, rank: 1 })
      .limit(Math.max(100, free * 4))
      .toArray();
    if (pending.length === 0) return;
    const keys = [...new Set(pending.map((p) => p.key))];
    const busy = await outbox.find({ endpoint_id: endpointId, key: { $in: keys }, status: { $in: ['queued', 'failed', 'held'] } }, { projection: { key: 1, status: 1 } }).toArray();
    const blocked = new Set(busy.filter((b) => b.status !== 'queued').map((b) => b.key));
    const busyKeys = new Set(busy.map((b) => b.key));
    if (blocked.size > 0) {
      // Out of the pending scan until the failed one is replayed, so they never stand in front of other records.
      await outbox.updateMany({ endpoint_id: endpointId, key: { $in: [...blocked] }, status: 'pending' }, { $set: { status: 'held', updated_at: new Date() } });
    }
    const picked: Pick<DeliveryDoc, '_id' | 'key' | 'seq' | 'rank'>[] = [];
    const seen = new Set<string>();
    for (const p of pending) {
      // The page is sorted by order: the first pending event of a record is its earliest.
      if (seen.has(p.key)) continue;
      seen.add(p.key);
      if (busyKeys.has(p.key)) continue;
      picked.push(p);
      if (picked.length >= free) break;
    }
    if (picked.length === 0) return;
    // Queued first, marked after: a pass that dies in between leaves them pending, and the next
    // pass adds the same job ids, which BullMQ ignores while the jobs exist.
    await options.queue.addBulk(picked.map((p) => ({ name: DELIVERY_JOB_NAME, data: { delivery_id: p._id, key: p.key, seq: p.seq, rank: p.rank }, opts: { ...options.jobOptions, jobId: p._id } })));
    await outbox.updateMany({ _id: { $in: picked.map((p) => p._id) }, status: 'pending' }, { $set: { status: 'queued', updated_at: new Date() } });
  }

  /** Deliveries marked queued whose job Redis no longer has (Redis lost data) go back to pending. */
  async function reconcile(): Promise<void> {
    const queued = await outbox.find({ status: 'queued', updated_at: { $lt: new Date(Date.now() - RECONCILE_EVERY_MS) } }, { projection: { _id: 1 } }).limit(1000).toArray();
    for (const { _id } of queued) {
      if ((await options.queue.getJob(_id)) === undefined) await outbox.updateOne({ _id, status: 'queued' }, { $set: { status: 'pending', updated_at: new Date() } });
    }
  }

  async function pass(): Promise<void> {
    for (const endpoint of options.subscriptions.all()) await dispatchEndpoint(endpoint._id);
    const now = Date.now();
    if (now - lastReconcile >= RECONCILE_EVERY_MS) {
      lastReconcile = now;
      await reconcile();
    }
    if (now - lastPrune >= PRUNE_EVERY_MS) {
      lastPrune = now;
      await outbox.deleteMany({ status: { $in: ['delivered', 'superseded'] }, updated_at: { $lt: new Date(now - options.keepDeliveredMs) } });
    }
  }

  function run(): Promise<void> {
    if (running !== undefined) {
      again = true;
      return running;
    }
    running = (async () => {
      do {
        again = false;
        try {
          await pass();
        } catch (err) {
          options.logger.warn({ err: (err as Error).message }, 'webhook dispatch pass failed; retrying at the next tick');
        }
      } while (again && !stopped);
    })().finally(() => {
      running = undefined;
    });
    return running;
  }

  // A tick finding a pass running skips: only kicks (new events, a finished delivery) ask for one more pass after it.
  const timer = setInterval(() => {
    if (running === undefined) void run();
  }, options.intervalMs);
  timer.unref();
  // Kicks within KICK_DELAY_MS share one pass: under load, events and finished deliveries come by
  // the hundred per second, and a pass each would keep the store busy with the outbox.
  let kickTimer: NodeJS.Timeout | undefined;
  return {
    kick: () => {
      if (kickTimer !== undefined || stopped) return;
      kickTimer = setTimeout(() => {
        kickTimer = undefined;
        void run();
      }, Math.min(KICK_DELAY_MS, options.intervalMs));
      kickTimer.unref();
    },
    runOnce: run,
    async close() {
      stopped = true;
      clearInterval(timer);
      clearTimeout(kickTimer);
      await running;
    },
  };
}
