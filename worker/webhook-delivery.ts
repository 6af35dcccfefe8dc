import type { Job } from 'bullmq';
import type { AnyBulkWriteOperation, Db } from 'mongodb';
import { COLLECTIONS } from '../shared/mongo.js';
import type { WebhookEndpointDoc } from '../shared/webhook-admin.js';
import { recordKey, type DeliveryDoc } from '../shared/webhook-outbox.js';
import { sendWebhook, type WebhookTargetPolicy } from '../shared/webhook-sender.js';
import type { DeliveryLeases } from '../shared/webhook-leases.js';
import type { DeliveryJobData } from './webhook-dispatcher.js';
import type { WebhookSubscriptions } from './webhook-subscriptions.js';

export type DeliveryOutcome = 'delivered' | 'attempt_failed' | 'failed' | 'superseded' | 'skipped';

/** A delivery attempt the endpoint did not accept; BullMQ retries it with backoff. */
export class DeliveryAttemptError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DeliveryAttemptError';
  }
}

/**
 * The exponential backoff of deliveries with jitter: attempt n+1 waits a random time between half
 * and all of min(max, base · 2^(n-1)), so that the retries of many deliveries to an endpoint that
 * came back do not arrive together.
 */
export function deliveryBackoffMs(attemptsMade: number, baseMs: number, maxMs: number, random: () => number = Math.random): number {
  const full = Math.min(maxMs, baseMs * 2 ** Math.min(Math.max(attemptsMade - 1, 0), 40));
  return Math.round(full / 2 + (random() * full) / 2);
}

/**
 * Whether `later`, an event of the same record delivered already and later in order, makes `doc`
 * an older state not to send (several worker processes can append a record's events out of
 * order). Only a later state of what `doc` is about does:
 *
 * - an event of the same subject (the same response's later version; the record's own events);
 * - a `record.completed`, which holds the record and every response as they were then, so it is a
 *   later state of all of them, and, when it is the older one, an older state of all of them (sent
 *   after a later version of a response, it would put that response back);
 *
 * never an event about something else: a later `response.updated` of one annotator does not carry
 * another's `response.created`, nor the record's fields of `record.created`, so those are sent,
 * out of the record's order, rather than lost (until 2026-11-27 any later event of the record
 * superseded them: with two worker processes, 18 of 4,500 `response.created` were never sent).
 * A `response.erased` is no state of the record: between it and an event about anything else
 * neither holds the other back, a `record.completed` included, so that an erasure's event,
 * appended by its sweep whenever that runs, is never dropped and never drops another response's;
 * against an event of its own response the order holds as for any state. Deliveries of earlier
 * releases, which carry no subject, are ordered by record as they were.
 */
export function supersedes(later: Pick<DeliveryDoc, 'event_type' | 'subject_id'>, doc: Pick<DeliveryDoc, 'event_type' | 'subject_id'>): boolean {
  if (later.event_type === 'response.erased' || doc.event_type === 'response.erased') return later.subject_id !== undefined && later.subject_id === doc.subject_id;
  if (later.subject_id === undefined || doc.subject_id === undefined) return true;
  if (later.event_type === 'record.completed' || doc.event_type === 'record.completed') return true;
  return later.subject_id === doc.subject_id;
}

/** What a delivery job did, by delivery. */
export interface JobOutcome {
  readonly delivered: number;
  readonly superseded: number;
  readonly failed: number;
}

export interface DeliveryProcessor {
  /**
   * Sends the job's deliveries that are still pending under its pass's leases, each its own signed
   * POST, records the outcomes in one bulk write (an update per delivery) and then releases the
   * leases of the records done. Throws DeliveryAttemptError when some failed, so that BullMQ retries
   * the job with backoff: the retry skips those delivered, whose leases are gone.
   */
  process(job: Job<DeliveryJobData>): Promise<JobOutcome>;
  /** Every attempt failed: the job's deliveries not delivered are `failed`, their records' later events held, and then their leases released. */
  onFinalFailure(job: Job<DeliveryJobData>, err: Error): Promise<void>;
}

/** How long a delivery process trusts what it read of an endpoint's existence, ms: a deleted endpoint gets no POST started later than this after its DELETE. */
export const ENDPOINT_CHECK_MS = 250;

/** Runs at most `n` of the functions given at once (the POSTs of every delivery job of a process). */
export function createSendLimit(n: number): <T>(fn: () => Promise<T>) => Promise<T> {
  let running = 0;
  const waiting: (() => void)[] = [];
  return async (fn) => {
    if (running >= n) await new Promise<void>((resolve) => waiting.push(resolve));
    running++;
    try {
      return await fn();
    } finally {
      running--;
      waiting.shift()?.();
    }
  };
}

export function createDeliveryProcessor(options: {
  readonly db: Db;
  readonly subscriptions: WebhookSubscriptions;
  readonly leases: DeliveryLeases;
  readonly policy: WebhookTargetPolicy;
  readonly timeoutMs: number;
  /** Bounds the POSTs in flight in the process (WEBHOOK_CONCURRENCY). */
  readonly limit: <T>(fn: () => Promise<T>) => Promise<T>;
  readonly onOutcome: (endpointId: string, outcome: DeliveryOutcome, n: number) => void;
}): DeliveryProcessor {
  const outbox = options.db.collection<DeliveryDoc>(COLLECTIONS.webhookOutbox);
  const endpoints = options.db.collection<WebhookEndpointDoc>(COLLECTIONS.webhookEndpoints);
  const none: JobOutcome = { delivered: 0, superseded: 0, failed: 0 };

  /**
   * The job's deliveries it may send: pending, with their record's lease held by the job's pass,
   * or (a job of an earlier release) marked queued under its claim. Every lease of the job's records
   * its pass still holds comes with them.
   */
  async function ownDeliveries(job: Job<DeliveryJobData>): Promise<{ mine: DeliveryDoc[]; leased: Set<string> }> {
    const { endpoint_id: endpointId, claim, deliveries } = job.data;
    const [found, leased] = await Promise.all([
      outbox.find({ _id: { $in: deliveries.map((d) => d.id) }, status: { $in: ['pending', 'queued'] } }).toArray(),
      options.leases.mine(endpointId, claim, [...new Set(deliveries.map((d) => d.key))]),
    ]);
    return { mine: found.filter((d) => (d.status === 'pending' && leased.has(d.key)) || (d.status === 'queued' && d.claim === claim)), leased };
  }

  /** Per endpoint, when its existence was last read and what was read (a read failing: taken as existing). */
  const existence = new Map<string, { readonly at: number; readonly exists: Promise<boolean> }>();
  function endpointExists(id: string): Promise<boolean> {
    const now = Date.now();
    const held = existence.get(id);
    if (held !== undefined && now - held.at < ENDPOINT_CHECK_MS) return held.exists;
    const exists = endpoints.findOne({ _id: id }, { projection: { _id: 1 } }).then((doc) => doc !== null, () => true);
    existence.set(id, { at: now, exists });
    if (existence.size > 1_000) existence.clear();
    return exists;
  }

  return {
    async process(job) {
      const { endpoint_id: endpointId, claim, deliveries } = job.data;
      // A job of an earlier release (one delivery, no claim): its delivery goes back to pending by reconcile() and is queued again.
      if (!Array.isArray(deliveries)) return none;
      const keys = [...new Set(deliveries.map((d) => recordKey(endpointId, d.key)))];
      // The deliveries, and the events of their records already delivered to the endpoint: several
      // worker processes may append a record's events out of order, and an older state than one the
      // endpoint already has is not sent.
      const [{ mine, leased }, delivered] = await Promise.all([
        ownDeliveries(job),
        outbox.find({ k: { $in: keys }, status: 'delivered' }, { projection: { key: 1, seq: 1, rank: 1, event_type: 1, subject_id: 1 } }).toArray(),
      ]);
      // Leases of records with nothing left to send here (delivered by an earlier attempt of the job, erased) go at once.
      const release = (keep: ReadonlySet<string>) => options.leases.release(endpointId, claim, [...leased].filter((key) => !keep.has(key)));
      if (mine.length === 0) {
        await release(new Set());
        return none;
      }
      const endpoint = options.subscriptions.byId(endpointId) ?? (await endpoints.findOne({ _id: endpointId })) ?? undefined;
      if (endpoint === undefined) {
        await release(new Set());
        return none;
      }
      const isLater = (later: Pick<DeliveryDoc, 'seq' | 'rank'>, doc: Pick<DeliveryDoc, 'seq' | 'rank'>) => later.seq > doc.seq || (later.seq === doc.seq && later.rank > doc.rank);
      const superseded = mine.filter((doc) => delivered.some((d) => d.key === doc.key && isLater(d, doc) && supersedes(d, doc)));
      const toSend = mine.filter((doc) => !superseded.includes(doc));
      const attempts = job.attemptsMade + 1;
      // Each POST, when its turn comes, only while the endpoint exists: a DELETE stops this
      // process's sends within ENDPOINT_CHECK_MS, not once the deliveries it already read are sent.
      const sent = await Promise.all(
        toSend.map(async (doc) => ({
          doc,
          outcome: await options.limit(async () => ((await endpointExists(endpointId)) ? sendWebhook({ url: endpoint.url, secret: endpoint.secret }, { id: doc.event_id, timestamp: new Date(), body: doc.body }, { ...options.policy, timeoutMs: options.timeoutMs }) : undefined)),
        })),
      );
      if (sent.some((s) => s.outcome === undefined)) {
        // Deleted meanwhile: its outbox is gone with it; nothing to record, nothing to retry.
        await release(new Set());
        return none;
      }
      const outcomes = sent as { doc: DeliveryDoc; outcome: NonNullable<(typeof sent)[number]['outcome']> }[];
      const now = new Date();
      // Only these documents, still as read: this job holds their records' leases (or, an earlier release's, their claim).
      // One updateOne per delivery: DocumentDB runs an updateMany on `_id: {$in}` as a scan of the
      // outbox (25 ms for 16 ids in an outbox of 40,000), 16 updateOne in one bulk take 4 ms
      // (docs/performance.md, "Issue 24, fourth pass").
      const still = (id: string) => ({ _id: id, status: { $in: ['pending', 'queued'] as DeliveryDoc['status'][] } });
      const done = { $unset: { q: '', f: '', claim: '', last_error: '' } } as const;
      const writes: AnyBulkWriteOperation<DeliveryDoc>[] = [];
      if (superseded.length > 0) {
        for (const d of superseded) writes.push({ updateOne: { filter: still(d._id), update: { $set: { status: 'superseded', updated_at: now }, ...done } } });
      }
      // The fields to set, per distinct outcome (usually one: every POST answered 200).
      const groups = new Map<string, { ids: string[]; set: Partial<DeliveryDoc>; delivered: boolean }>();
      for (const { doc, outcome } of outcomes) {
        const group = outcome.ok ? `ok ${outcome.status}` : `failed ${outcome.status ?? ''} ${outcome.error}`;
        let g = groups.get(group);
        if (g === undefined) {
          const set: Partial<DeliveryDoc> = outcome.ok
            ? { status: 'delivered', attempts, last_status: outcome.status, delivered_at: now, updated_at: now }
            : { attempts, last_error: outcome.error, ...(outcome.status === undefined ? {} : { last_status: outcome.status }), updated_at: now };
          g = { ids: [], set, delivered: outcome.ok };
          groups.set(group, g);
        }
        g.ids.push(doc._id);
      }
      for (const g of groups.values()) {
        for (const id of g.ids) writes.push({ updateOne: { filter: still(id), update: g.delivered ? { $set: g.set, ...done } : { $set: g.set } } });
      }
      if (writes.length > 0) await outbox.bulkWrite(writes, { ordered: false });
      const ok = outcomes.filter((o) => o.outcome.ok).length;
      const failed = outcomes.length - ok;
      // Written, so the records' next events may go; those that failed keep theirs through the job's retries.
      await release(new Set(outcomes.filter((o) => !o.outcome.ok).map((o) => o.doc.key)));
      if (superseded.length > 0) options.onOutcome(endpointId, 'superseded', superseded.length);
      if (ok > 0) options.onOutcome(endpointId, 'delivered', ok);
      if (failed > 0) {
        options.onOutcome(endpointId, 'attempt_failed', failed);
        const first = outcomes.find((o) => !o.outcome.ok)!.outcome as { readonly error: string };
        throw new DeliveryAttemptError(`${failed} of ${outcomes.length} deliveries failed (${first.error})`);
      }
      return { delivered: ok, superseded: superseded.length, failed };
    },
    async onFinalFailure(job, err) {
      const { endpoint_id: endpointId, claim, deliveries } = job.data;
      if (!Array.isArray(deliveries)) return;
      const { mine: stuck, leased } = await ownDeliveries(job);
      if (stuck.length > 0) {
        const now = new Date();
        // Each keeps the error of its own last attempt; the job's message stands in for one never recorded.
        await outbox.bulkWrite(
          stuck.map((d) => ({ updateOne: { filter: { _id: d._id, status: d.status }, update: { $set: { status: 'failed', last_error: d.last_error ?? err.message, updated_at: now }, $unset: { q: '', f: '', claim: '' } } } })),
          { ordered: false },
        );
        await outbox.updateMany({ k: { $in: [...new Set(stuck.map((d) => recordKey(endpointId, d.key)))] }, status: 'pending' }, { $set: { status: 'held', updated_at: now }, $unset: { q: '' } });
        options.onOutcome(endpointId, 'failed', stuck.length);
      }
      // Failed and held are written: the dispatcher keeps these records back from now on without their leases.
      await options.leases.release(endpointId, claim, [...leased]);
    },
  };
}
