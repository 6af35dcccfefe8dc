import { randomBytes } from 'node:crypto';
import type { Db, Filter } from 'mongodb';
import * as v from 'valibot';
import { COLLECTIONS } from './mongo.js';
import { closedObject, DatasetId, queryLimit } from './schemas.js';
import { WEBHOOK_EVENT_TYPES, type WebhookEventType } from './webhook-events.js';
import type { DeliveryLeases } from './webhook-leases.js';
import { DELIVERY_STATUSES, pendingOrder, type BatchDoc, type DeliveryDoc, type DeliveryStatus } from './webhook-outbox.js';

/*
 * Webhook endpoints and their deliveries in MongoDB: the one implementation behind
 * `/admin/webhooks` (and anything else that manages them). The worker reads the endpoints
 * (worker/webhook-subscriptions.ts) and writes the deliveries (worker/event-outbox.ts).
 */

/** Most endpoints one deployment may register: each costs a share of every store round. */
export const MAX_WEBHOOK_ENDPOINTS = 100;

/** `POST /admin/webhooks`. */
export const WebhookEndpointInput = closedObject({
  url: v.pipe(
    v.string('must be a string'),
    // Stored as given and used as stored: spaces around it would be dropped by the URL parser, so say so.
    v.check((s) => s.trim() === s, 'must not have spaces around it'),
    v.maxLength(2048, 'must be at most 2048 characters'),
    v.check((s) => {
      try {
        const u = new URL(s);
        return (u.protocol === 'https:' || u.protocol === 'http:') && u.username === '' && u.password === '';
      } catch {
        return false;
      }
    }, 'must be an absolute http(s) URL without credentials'),
    v.description('Where events are POSTed. `https://` only, unless the service runs with `WEBHOOKS_ALLOW_INSECURE=true`.'),
  ),
  events: v.pipe(v.array(v.picklist(WEBHOOK_EVENT_TYPES, `must be one of ${WEBHOOK_EVENT_TYPES.join(', ')}`), 'must be a list of event types'), v.minLength(1, 'must name at least one event type'), v.description('The event types sent to this endpoint.')),
  datasets: v.exactOptional(v.pipe(v.array(DatasetId, 'must be a list of dataset ids'), v.minLength(1, 'must name at least one dataset (leave it out for every dataset)'), v.maxLength(1000, 'must name at most 1000 datasets'), v.description('Only events of these datasets; absent = every dataset.'))),
  description: v.exactOptional(v.pipe(v.string('must be a string'), v.maxLength(500, 'must be at most 500 characters'))),
}, 'must be a JSON object');
export type WebhookEndpointInput = v.InferOutput<typeof WebhookEndpointInput>;

/** An endpoint as stored. The secret is needed to sign, so it is kept; it is shown once, at creation. */
export interface WebhookEndpointDoc {
  _id: string;
  url: string;
  events: WebhookEventType[];
  /** null = every dataset. */
  datasets: string[] | null;
  description: string | null;
  secret: string;
  created_at: Date;
}

const SUMMARY_STATUSES = ['pending', 'queued', 'delivered', 'failed', 'held', 'superseded'] as const;

export const WebhookEndpointView = v.object({
  id: v.string(),
  url: v.string(),
  events: v.array(v.picklist(WEBHOOK_EVENT_TYPES)),
  datasets: v.pipe(v.nullable(v.array(v.string())), v.description('null = every dataset.')),
  description: v.nullable(v.string()),
  created_at: v.pipe(v.string(), v.description('ISO 8601 date-time.')),
  deliveries: v.pipe(v.object(Object.fromEntries(SUMMARY_STATUSES.map((s) => [s, v.number()])) as Record<(typeof SUMMARY_STATUSES)[number], v.NumberSchema<undefined>>), v.description('Deliveries in the outbox by status (delivered ones are kept `WEBHOOK_KEEP_DELIVERED_S`).')),
});
export type WebhookEndpointView = v.InferOutput<typeof WebhookEndpointView>;

export const WebhookEndpointCreated = v.object({
  ...v.omit(WebhookEndpointView, ['deliveries']).entries,
  secret: v.pipe(v.string(), v.description('`whsec_<base64>`: verify signatures with it (Standard Webhooks). Shown only here.')),
});
export type WebhookEndpointCreated = v.InferOutput<typeof WebhookEndpointCreated>;

export const WebhookEndpointList = v.object({ items: v.array(WebhookEndpointView) });
export type WebhookEndpointList = v.InferOutput<typeof WebhookEndpointList>;

export const DeliveryListQuery = v.strictObject({
  status: v.exactOptional(v.picklist(DELIVERY_STATUSES, `must be one of ${DELIVERY_STATUSES.join(', ')}`)),
  limit: queryLimit(500, 50),
});
export type DeliveryListQuery = v.InferOutput<typeof DeliveryListQuery>;

export const DeliveryView = v.object({
  id: v.string(),
  event_id: v.pipe(v.string(), v.description('The `webhook-id` sent.')),
  event_type: v.picklist(WEBHOOK_EVENT_TYPES),
  feedback_record_id: v.string(),
  seq: v.number(),
  status: v.picklist(DELIVERY_STATUSES),
  attempts: v.number(),
  last_status: v.nullable(v.number()),
  last_error: v.nullable(v.string()),
  created_at: v.string(),
  updated_at: v.string(),
  delivered_at: v.nullable(v.string()),
});
export type DeliveryView = v.InferOutput<typeof DeliveryView>;

export const DeliveryList = v.object({ items: v.array(DeliveryView) });
export type DeliveryList = v.InferOutput<typeof DeliveryList>;

export const DeliveriesReplayed = v.object({ endpoint_id: v.string(), replayed: v.pipe(v.number(), v.description('Failed and held deliveries put back in the outbox, sent again in their order.')) });
export type DeliveriesReplayed = v.InferOutput<typeof DeliveriesReplayed>;

export const WebhookEndpointDeleted = v.object({ id: v.string(), deleted: v.literal(true) });
export type WebhookEndpointDeleted = v.InferOutput<typeof WebhookEndpointDeleted>;

/** Deliveries put back to pending per bulk command of a replay. */
const REPLAY_PAGE = 1000;

/** Too many endpoints. */
export class WebhookLimitError extends Error {}

export interface WebhookAdmin {
  create(input: WebhookEndpointInput): Promise<WebhookEndpointCreated>;
  list(): Promise<WebhookEndpointList>;
  get(id: string): Promise<WebhookEndpointDoc | undefined>;
  /** Deletes the endpoint, its outbox entries and its batches; false when there was none. */
  remove(id: string): Promise<boolean>;
  deliveries(id: string, query: DeliveryListQuery): Promise<DeliveryList>;
  /** Puts the endpoint's failed and held deliveries back to pending (attempts reset); returns how many. */
  replay(id: string): Promise<number>;
}

/** A Standard Webhooks secret: `whsec_` and 32 random bytes in base64. */
export function newWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

function endpointView(doc: WebhookEndpointDoc): Omit<WebhookEndpointView, 'deliveries'> {
  return { id: doc._id, url: doc.url, events: doc.events, datasets: doc.datasets, description: doc.description, created_at: doc.created_at.toISOString() };
}

function deliveryView(doc: DeliveryDoc): DeliveryView {
  return {
    id: doc._id,
    event_id: doc.event_id,
    event_type: doc.event_type,
    feedback_record_id: doc.key,
    seq: doc.seq,
    status: doc.status,
    attempts: doc.attempts,
    last_status: doc.last_status ?? null,
    last_error: doc.last_error ?? null,
    created_at: doc.created_at.toISOString(),
    updated_at: doc.updated_at.toISOString(),
    delivered_at: doc.delivered_at?.toISOString() ?? null,
  };
}

/**
 * `leases`: the deliveries in flight (shared/webhook-leases.ts), which the outbox keeps as `pending`:
 * counted and listed as `queued`. Without it (a process with no Redis) they show as pending.
 */
export function createWebhookAdmin(options: { readonly db: Db; readonly leases?: DeliveryLeases }): WebhookAdmin {
  const endpoints = options.db.collection<WebhookEndpointDoc>(COLLECTIONS.webhookEndpoints);
  const outbox = options.db.collection<DeliveryDoc>(COLLECTIONS.webhookOutbox);
  const batches = options.db.collection<BatchDoc>(COLLECTIONS.webhookBatches);

  async function counts(ids: readonly string[]): Promise<Map<string, WebhookEndpointView['deliveries']>> {
    const byEndpoint = new Map(ids.map((id) => [id, Object.fromEntries(SUMMARY_STATUSES.map((s) => [s, 0])) as WebhookEndpointView['deliveries']]));
    if (ids.length === 0) return byEndpoint;
    const rows = await outbox.aggregate<{ _id: { e: string; s: DeliveryStatus }; n: number }>([{ $match: { endpoint_id: { $in: [...ids] } } }, { $group: { _id: { e: '$endpoint_id', s: '$status' }, n: { $sum: 1 } } }]).toArray();
    for (const row of rows) {
      const c = byEndpoint.get(row._id.e);
      if (c !== undefined && (SUMMARY_STATUSES as readonly string[]).includes(row._id.s)) c[row._id.s as (typeof SUMMARY_STATUSES)[number]] = row.n;
    }
    // Events not yet moved from their batches into the outbox (worker/webhook-fan-out.ts) are pending.
    const batched = await batches.aggregate<{ _id: string; n: number }>([{ $match: { endpoint_id: { $in: [...ids] } } }, { $group: { _id: '$endpoint_id', n: { $sum: '$n' } } }]).toArray();
    for (const row of batched) {
      const c = byEndpoint.get(row._id);
      if (c !== undefined) c.pending += row.n;
    }
    if (options.leases !== undefined) {
      for (const [e, n] of await options.leases.counts(ids)) {
        const c = byEndpoint.get(e)!;
        const inFlight = Math.min(n, c.pending);
        c.pending -= inFlight;
        c.queued += inFlight;
      }
    }
    return byEndpoint;
  }

  return {
    async create(input) {
      if ((await endpoints.countDocuments({})) >= MAX_WEBHOOK_ENDPOINTS) throw new WebhookLimitError(`at most ${MAX_WEBHOOK_ENDPOINTS} webhook endpoints`);
      const doc: WebhookEndpointDoc = {
        _id: `wh_${randomBytes(12).toString('base64url')}`,
        url: input.url,
        events: [...new Set(input.events)],
        datasets: input.datasets === undefined ? null : [...new Set(input.datasets)],
        description: input.description ?? null,
        secret: newWebhookSecret(),
        created_at: new Date(),
      };
      await endpoints.insertOne(doc);
      return { ...endpointView(doc), secret: doc.secret };
    },
    async list() {
      const docs = await endpoints.find({}).sort({ created_at: 1, _id: 1 }).toArray();
      const c = await counts(docs.map((d) => d._id));
      return { items: docs.map((d) => ({ ...endpointView(d), deliveries: c.get(d._id)! })) };
    },
    async get(id) {
      return (await endpoints.findOne({ _id: id })) ?? undefined;
    },
    async remove(id) {
      const r = await endpoints.deleteOne({ _id: id });
      if (r.deletedCount === 0) return false;
      await outbox.deleteMany({ endpoint_id: id });
      await batches.deleteMany({ endpoint_id: id });
      return true;
    },
    async deliveries(id, query) {
      const inFlight = options.leases === undefined ? [] : [...(await options.leases.held(id)).values()].map((l) => l.deliveryId);
      const filter: Filter<DeliveryDoc> =
        query.status === 'queued'
          ? { $or: [{ _id: { $in: inFlight }, status: 'pending' }, { endpoint_id: id, status: 'queued' }] }
          : query.status === 'pending'
            ? { endpoint_id: id, status: 'pending', _id: { $nin: inFlight } }
            : { endpoint_id: id, ...(query.status === undefined ? {} : { status: query.status }) };
      const docs = await outbox
        .find(filter)
        .sort({ seq: -1, rank: -1 })
        .limit(query.limit ?? 50)
        .toArray();
      const leased = new Set(inFlight);
      return { items: docs.map((d) => deliveryView(d.status === 'pending' && leased.has(d._id) ? { ...d, status: 'queued' } : d)) };
    },
    async replay(id) {
      // Back in the dispatcher's scan: each needs its own `q`, so one update statement per delivery (one command per page).
      const docs = await outbox.find({ endpoint_id: id, status: { $in: ['failed', 'held'] } }, { projection: { _id: 1, seq: 1, rank: 1 } }).toArray();
      let replayed = 0;
      for (let i = 0; i < docs.length; i += REPLAY_PAGE) {
        const now = new Date();
        const page = docs.slice(i, i + REPLAY_PAGE);
        const r = await outbox.bulkWrite(
          page.map((d) => ({ updateOne: { filter: { _id: d._id, status: { $in: ['failed', 'held'] } }, update: { $set: { status: 'pending', attempts: 0, q: pendingOrder(id, d.seq, d.rank), updated_at: now } } } })),
          { ordered: false },
        );
        replayed += r.modifiedCount;
      }
      return replayed;
    },
  };
}
