import type { Job } from 'bullmq';
import type { Db } from 'mongodb';
import { COLLECTIONS } from '../shared/mongo.js';
import type { DeliveryDoc, WebhookEndpointDoc } from '../shared/webhook-admin.js';
import { sendWebhook, type WebhookTargetPolicy } from '../shared/webhook-sender.js';
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
 * an older state not to send. A `response.erased` is no state of the record: between it and an
 * event about anything else (another response, the record) neither holds the other back, so that
 * an erasure's event, appended by its sweep whenever that runs, is never dropped and never drops
 * another response's; against an event of its own response the order holds as for any state.
 */
export function supersedes(later: Pick<DeliveryDoc, 'event_type' | 'subject_id'>, doc: Pick<DeliveryDoc, 'event_type' | 'subject_id'>): boolean {
  if (later.event_type !== 'response.erased' && doc.event_type !== 'response.erased') return true;
  return later.subject_id !== undefined && later.subject_id === doc.subject_id;
}

export interface DeliveryProcessor {
  process(job: Job<DeliveryJobData>): Promise<DeliveryOutcome>;
  /** Every attempt failed: the delivery is `failed` and the record's later events are held. */
  onFinalFailure(job: Job<DeliveryJobData>, err: Error): Promise<void>;
}

export function createDeliveryProcessor(options: {
  readonly db: Db;
  readonly subscriptions: WebhookSubscriptions;
  readonly policy: WebhookTargetPolicy;
  readonly timeoutMs: number;
  readonly onOutcome: (endpointId: string, outcome: DeliveryOutcome) => void;
}): DeliveryProcessor {
  const outbox = options.db.collection<DeliveryDoc>(COLLECTIONS.webhookOutbox);
  const endpoints = options.db.collection<WebhookEndpointDoc>(COLLECTIONS.webhookEndpoints);

  return {
    async process(job) {
      const { delivery_id: id, key, seq, rank } = job.data;
      const endpointId = id.slice(0, id.indexOf('.'));
      // One query: the delivery, and any later event of the record already delivered to the
      // endpoint. Several worker processes may append a record's events out of order; an older
      // state than one the endpoint already has is not sent.
      const found = await outbox
        .find({ endpoint_id: endpointId, key, $or: [{ _id: id }, { status: 'delivered', seq: { $gt: seq } }, { status: 'delivered', seq, rank: { $gt: rank } }] })
        .toArray();
      const doc = found.find((d) => d._id === id);
      if (doc === undefined || (doc.status !== 'pending' && doc.status !== 'queued')) return 'skipped';
      const endpoint = options.subscriptions.byId(doc.endpoint_id) ?? (await endpoints.findOne({ _id: doc.endpoint_id })) ?? undefined;
      if (endpoint === undefined) return 'skipped';
      if (found.some((d) => d._id !== id && supersedes(d, doc))) {
        await outbox.updateOne({ _id: id }, { $set: { status: 'superseded', updated_at: new Date() } });
        options.onOutcome(doc.endpoint_id, 'superseded');
        return 'superseded';
      }
      const outcome = await sendWebhook({ url: endpoint.url, secret: endpoint.secret }, { id: doc.event_id, timestamp: new Date(), body: doc.body }, { ...options.policy, timeoutMs: options.timeoutMs });
      const now = new Date();
      const attempts = job.attemptsMade + 1;
      if (outcome.ok) {
        await outbox.updateOne({ _id: id }, { $set: { status: 'delivered', attempts, last_status: outcome.status, delivered_at: now, updated_at: now }, $unset: { last_error: '' } });
        options.onOutcome(doc.endpoint_id, 'delivered');
        return 'delivered';
      }
      await outbox.updateOne({ _id: id }, { $set: { attempts, last_error: outcome.error, ...(outcome.status === undefined ? {} : { last_status: outcome.status }), updated_at: now } });
      options.onOutcome(doc.endpoint_id, 'attempt_failed');
      throw new DeliveryAttemptError(outcome.error);
    },
    async onFinalFailure(job, err) {
      const doc = await outbox.findOneAndUpdate({ _id: job.data.delivery_id, status: { $in: ['pending', 'queued'] } }, { $set: { status: 'failed', last_error: err.message, updated_at: new Date() } });
      if (doc === null) return;
      await outbox.updateMany({ endpoint_id: doc.endpoint_id, key: doc.key, status: 'pending' }, { $set: { status: 'held', updated_at: new Date() } });
      options.onOutcome(doc.endpoint_id, 'failed');
    },
  };
}
