import { randomBytes } from 'node:crypto';
import type { JobsOptions, Queue } from 'bullmq';
import type { Db } from 'mongodb';
import type { Logger } from '../shared/logger.js';
import { COLLECTIONS } from '../shared/mongo.js';
import { endpointRange, pendingOrder, recordKey, type DeliveryDoc } from '../shared/webhook-outbox.js';
import type { DeliveryLeases } from '../shared/webhook-leases.js';
import type { WebhookFanOut } from './webhook-fan-out.js';
import { pruneOrphanedEvents } from './webhook-orphans.js';
import type { WebhookSubscriptions } from './webhook-subscriptions.js';

/**
 * The job of the delivery queue: deliveries of one endpoint queued by one dispatcher pass, at most
 * one per record, sent together (each its own signed POST) so that they cost the store one read
 * and one write between them instead of two each. Holds ids only (about 100 bytes a delivery).
 */
export interface DeliveryJobData {
  readonly endpoint_id: string;
  /** The pass that queued them: it holds their records' leases (shared/webhook-leases.ts); a delivery leased since by another pass is not this job's to send. */
  readonly claim: string;
  /** The deliveries and their records, so that the job reads them and their records' delivered events in one round trip. */
  readonly deliveries: readonly { readonly id: string; readonly key: string }[];
}
export const DELIVERY_JOB_NAME = 'deliver';
/** Deliveries per job: enough that the store's share per delivery is small, few enough that a pass's jobs run in parallel. */
export const DELIVERIES_PER_JOB = 16;

/**
 * Deliveries in flight per endpoint while this process's writer works through a backlog of
 * writes (a burst: worker/writer.ts `busy`) that has lasted longer than `burstYieldMs`: deliveries
 * then take a bounded share of the store and the CPU, and the full `WEBHOOK_MAX_IN_FLIGHT` once
 * the writer keeps up again. Deliveries never stop for longer than `burstYieldMs`, so a backlog
 * cannot starve them (about 300 events a second per endpoint at this cap on the stand-in).
 */
export const IN_FLIGHT_WHILE_WRITING = 50;

/**
 * The most deliveries an endpoint may have in flight now: none during the first `yieldMs` of a
 * backlog of writes (a burst drains as it would without webhooks: a delivery costs the store and
 * the CPU several times what appending its event does, docs/webhooks.md#speed), a bounded share
 * after that while it lasts, all of `maxInFlight` otherwise. `busySince` is when the current
 * backlog began (undefined: none). Pure, for its unit test.
 */
export function deliveryCap(maxInFlight: number, yieldMs: number, busySince: number | undefined, now: number): number {
  if (busySince === undefined) return maxInFlight;
  return now - busySince < yieldMs ? 0 : Math.min(maxInFlight, IN_FLIGHT_WHILE_WRITING);
}

/** How often leases (and deliveries an earlier release marked `queued`) are checked against the jobs Redis holds (one a pass left without a job is released). */
const RECONCILE_EVERY_MS = 30_000;
/** Longest a pass asked for by a kick waits, gathering the kicks that come meanwhile. */
const KICK_DELAY_MS = 100;
/** How often delivered events older than the retention, and events of endpoints deleted since (worker/webhook-orphans.ts), are deleted. */
const PRUNE_EVERY_MS = 60_000;
/** The states of a delivery job that is still to run (BullMQ). */
const LIVE_JOB_STATES = ['waiting', 'active', 'delayed', 'prioritized', 'waiting-children'] as const;

export interface WebhookDispatcher {
  /** Runs a pass soon (after a store round appended events). */
  kick(): void;
  /** One pass now (tests). */
  runOnce(): Promise<void>;
  close(): Promise<void>;
}

/**
 * Moves deliveries from the outbox (MongoDB) to the delivery queue (Redis), per endpoint at most
 * `maxInFlight` at once (in jobs of up to {@link DELIVERIES_PER_JOB}) and at most one per record: the next event of a record is queued only
 * once the one before it is delivered, so a record's events (hence a response's) reach an
 * endpoint in their order, retries included. A record whose delivery failed for good holds its
 * later events (`held`) until the failed one is replayed.
 */
export function createWebhookDispatcher(options: {
  readonly db: Db;
  readonly queue: Queue<DeliveryJobData>;
  readonly subscriptions: WebhookSubscriptions;
  readonly leases: DeliveryLeases;
  /** Moves events from their batches into the outbox as the dispatcher needs them; absent: only the outbox's events are dispatched. */
  readonly fanOut?: WebhookFanOut;
  readonly logger: Logger;
  readonly maxInFlight: number;
  /** True while the worker's writer works through a backlog: deliveries wait, then keep to {@link IN_FLIGHT_WHILE_WRITING} per endpoint ({@link deliveryCap}). */
  readonly writing?: () => boolean;
  /** `WEBHOOK_BURST_YIELD_MS`: how long a backlog of writes holds new deliveries back. Default 0. */
  readonly burstYieldMs?: number;
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
  let busySince: number | undefined;
  /** When the writer's current backlog began, as seen by the passes (undefined: none now). */
  const backlogSince = (): number | undefined => {
    if (options.writing?.() !== true) return (busySince = undefined);
    return (busySince ??= Date.now());
  };

  async function dispatchEndpoint(endpointId: string): Promise<void> {
    // Records with a delivery in flight: their leases, in Redis beside the jobs (shared/webhook-leases.ts).
    const leased = await options.leases.held(endpointId);
    const cap = deliveryCap(options.maxInFlight, options.burstYieldMs ?? 0, backlogSince(), Date.now());
    const free = cap - leased.size;
    if (free <= 0) return;
    // Some pending deliveries of the endpoint (`q` is on pending ones only, those in flight included), unsorted: the store's
    // index does not return them in order, and sorting every pending one on each pass costs the
    // store as much as the backlog is long. In the order they were stored, which is near enough to
    // oldest first; the order that matters, a record's, is taken from the record's own deliveries below.
    const size = Math.max(100, free * 4) + leased.size;
    const scan = () => outbox.find({ q: endpointRange(endpointId) }, { projection: { _id: 1, key: 1 } }).limit(size).batchSize(size).toArray();
    let page = await scan();
    // Events still in their batches (worker/webhook-fan-out.ts) come into the outbox as the scan runs short of them.
    if (page.length < size && options.fanOut !== undefined && (await options.fanOut.move(endpointId, size - page.length)) > 0) page = await scan();
    // A record with a delivery in flight waits for it: its next one is picked once the lease is released.
    // At most twice as many as can go: the query below costs the store about 0.1 ms a record.
    const records = [...new Set(page.map((p) => p.key))].filter((key) => !leased.has(key)).slice(0, free * 2);
    if (records.length === 0) return;
    // Every open delivery of these records: one failed keeps the record back (as one `queued` by an earlier release does); else its earliest pending one goes.
    const open = await outbox.find({ k: { $in: records.map((key) => recordKey(endpointId, key)) }, status: { $in: ['pending', 'queued', 'failed', 'held'] } }, { projection: { _id: 1, key: 1, status: 1, seq: 1, rank: 1 } }).toArray();
    const blocked = new Set(open.filter((b) => b.status === 'failed' || b.status === 'held').map((b) => b.key));
    const busyKeys = new Set(open.filter((b) => b.status !== 'pending').map((b) => b.key));
    if (blocked.size > 0) {
      // Out of the pending scan until the failed one is replayed, so they never stand in front of other records.
      await outbox.updateMany({ k: { $in: [...blocked].map((key) => recordKey(endpointId, key)) }, status: 'pending' }, { $set: { status: 'held', updated_at: new Date() }, $unset: { q: '' } });
    }
    const earliest = new Map<string, Pick<DeliveryDoc, '_id' | 'key' | 'seq' | 'rank'>>();
    for (const d of open) {
      if (d.status !== 'pending' || busyKeys.has(d.key)) continue;
      const e = earliest.get(d.key);
      if (e === undefined || d.seq < e.seq || (d.seq === e.seq && d.rank < e.rank)) earliest.set(d.key, d);
    }
    // Records in the page's order, each by its earliest pending delivery.
    const picked = records.flatMap((key) => {
      const e = earliest.get(key);
      return e === undefined ? [] : [e];
    }).slice(0, free);
    if (picked.length === 0) return;
    // Leased first, queued after: a pass that dies in between leaves leases without a job, which
    // reconcile() releases. The claim names this pass: of records another process's pass picked at
    // the same moment, only those whose lease this one took are in its jobs. The outbox is not
    // written: the delivery stays `pending` until its job records the outcome.
    const claim = `${endpointId}.${randomBytes(8).toString('hex')}`;
    const taken = await options.leases.take(endpointId, claim, picked.map((d) => ({ key: d.key, id: d._id })));
    const claimed = picked.filter((d) => taken.has(d.key));
    const jobs: { name: string; data: DeliveryJobData; opts: JobsOptions }[] = [];
    for (let i = 0; i < claimed.length; i += DELIVERIES_PER_JOB) {
      const deliveries = claimed.slice(i, i + DELIVERIES_PER_JOB).map((d) => ({ id: d._id, key: d.key }));
      jobs.push({ name: DELIVERY_JOB_NAME, data: { endpoint_id: endpointId, claim, deliveries }, opts: { ...options.jobOptions, jobId: `${claim}.${i / DELIVERIES_PER_JOB}` } });
    }
    if (jobs.length > 0) await options.queue.addBulk(jobs);
  }

  /**
   * Leases older than RECONCILE_EVERY_MS whose job Redis no longer has (a pass died before
   * queueing) are released; deliveries an earlier release marked queued whose job is gone go back
   * to pending.
   */
  async function reconcile(): Promise<void> {
    const cutoff = new Date(Date.now() - RECONCILE_EVERY_MS);
    let live: Set<string> | undefined;
    // Jobs are few (at most WEBHOOK_MAX_IN_FLIGHT deliveries an endpoint): read their claims once.
    const liveClaims = async () => (live ??= new Set((await options.queue.getJobs([...LIVE_JOB_STATES])).flatMap((j) => (j === undefined || j === null ? [] : [j.data.claim]))));
    for (const endpoint of options.subscriptions.all()) {
      const old = [...(await options.leases.held(endpoint._id))].filter(([, lease]) => lease.at < cutoff.getTime());
      if (old.length > 0) {
        const claims = await liveClaims();
        const lost = new Map<string, string[]>();
        for (const [key, lease] of old) if (!claims.has(lease.claim)) lost.set(lease.claim, [...(lost.get(lease.claim) ?? []), key]);
        for (const [claim, keys] of lost) await options.leases.release(endpoint._id, claim, keys);
      }
      // Deliveries queued by an earlier release (`f` is on them only).
      const stale = await outbox.find({ f: endpoint._id, updated_at: { $lt: cutoff } }, { projection: { _id: 1, seq: 1, rank: 1, claim: 1 } }).limit(1000).toArray();
      if (stale.length === 0) continue;
      const claims = await liveClaims();
      const lost = stale.filter((d) => d.claim === undefined || !claims.has(d.claim));
      if (lost.length === 0) continue;
      const now = new Date();
      await outbox.bulkWrite(
        lost.map((d) => ({ updateOne: { filter: { _id: d._id, status: 'queued', ...(d.claim === undefined ? {} : { claim: d.claim }) }, update: { $set: { status: 'pending', q: pendingOrder(endpoint._id, d.seq, d.rank), updated_at: now }, $unset: { f: '', claim: '' } } } })),
        { ordered: false },
      );
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
      const gone = await pruneOrphanedEvents(options.db);
      if (gone.length > 0) options.logger.info({ endpoint_ids: gone }, 'deleted events left for webhook endpoints that no longer exist');
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
