import type { Db } from 'mongodb';
import type { Logger } from '../shared/logger.js';
import { COLLECTIONS } from '../shared/mongo.js';
import { deliveryId, pendingOrder, recordKey, type DeliveryDoc } from '../shared/webhook-outbox.js';
import { EVENT_RANK, eventBody, eventId, type StoredEvent, type WebhookEventType } from '../shared/webhook-events.js';
import { insertNew, type InsertOutcome } from './inserts.js';
import { STORE_CHUNK_DOCS } from './store-chunks.js';
import type { WebhookSubscriptions } from './webhook-subscriptions.js';

/**
 * The outbox of webhook events (`webhook_outbox`): one document per (endpoint, event), written by
 * the store round that stored what the event describes, before its jobs complete. Deliveries
 * wait here, in MongoDB, not in Redis (worker/webhook-dispatcher.ts moves a bounded few at a time
 * to the delivery queue).
 */
export interface EventOutbox {
  /** True when some endpoint is subscribed; producers skip building events otherwise. */
  active(): boolean;
  /** True when some endpoint takes events of this type and dataset: a producer that must read to build one asks first. */
  subscribed(type: WebhookEventType, datasetId: string): boolean;
  /**
   * Adds the events for every endpoint subscribed to them. An event already there (the same id:
   * a job run twice) is kept as it is. Throws TransientStoreError when MongoDB is unreachable, so
   * that the caller's round is retried.
   */
  append(events: readonly StoredEvent[]): Promise<void>;
}

export function createEventOutbox(options: {
  readonly db: Db;
  readonly subscriptions: WebhookSubscriptions;
  readonly logger: Logger;
  /** Called after events were added (the dispatcher starts at once instead of at its next tick). */
  readonly onAppended?: () => void;
  /** Counts deliveries added and refused, by endpoint. */
  readonly onOutcome?: (endpointId: string, outcome: 'appended' | 'append_rejected', n: number) => void;
}): EventOutbox {
  const col = options.db.collection<DeliveryDoc>(COLLECTIONS.webhookOutbox);
  return {
    active: () => options.subscriptions.any(),
    subscribed: (type, datasetId) => options.subscriptions.matching(type, datasetId).length > 0,
    async append(events) {
      if (events.length === 0 || !options.subscriptions.any()) return;
      const now = new Date();
      const docs: DeliveryDoc[] = [];
      for (const event of events) {
        const endpoints = options.subscriptions.matching(event.type, event.datasetId);
        if (endpoints.length === 0) continue;
        const id = eventId(event);
        const body = eventBody(event);
        for (const endpoint of endpoints) {
          docs.push({
            _id: deliveryId(endpoint._id, id),
            endpoint_id: endpoint._id,
            event_id: id,
            event_type: event.type,
            key: event.recordId,
            k: recordKey(endpoint._id, event.recordId),
            q: pendingOrder(endpoint._id, event.seq, EVENT_RANK[event.type]),
            subject_id: event.subjectId,
            seq: event.seq,
            rank: EVENT_RANK[event.type],
            dataset_id: event.datasetId,
            body,
            status: 'pending',
            attempts: 0,
            created_at: now,
            updated_at: now,
          });
        }
      }
      if (docs.length === 0) return;
      // In the dispatcher's order, (seq, rank), one command after another: the dispatcher sends a
      // record's earliest pending event and drops one older than an event of the record already
      // delivered, so a later event of a record must never become visible before an earlier one.
      // Commands run at once (insertNew's chunks) let a record's response.created land before its
      // record.created, which was then superseded and never sent (50 of 10,000 records in a bench
      // burst, 2026-11-26).
      docs.sort((a, b) => a.seq - b.seq || a.rank - b.rank);
      const outcomes: InsertOutcome[] = [];
      for (let i = 0; i < docs.length; i += STORE_CHUNK_DOCS) outcomes.push(...(await insertNew(col, docs.slice(i, i + STORE_CHUNK_DOCS))));
      const rejected = new Map<string, number>();
      outcomes.forEach((o, i) => {
        if (o.kind !== 'rejected') return;
        // Only a document MongoDB cannot hold (an event larger than 16 MiB): the write itself is stored.
        const doc = docs[i]!;
        rejected.set(doc.endpoint_id, (rejected.get(doc.endpoint_id) ?? 0) + 1);
        options.logger.error({ event_id: doc.event_id, endpoint_id: doc.endpoint_id, err: o.error }, 'webhook event refused by the store; not delivered');
      });
      const appended = new Map<string, number>();
      for (const d of docs) appended.set(d.endpoint_id, (appended.get(d.endpoint_id) ?? 0) + 1);
      for (const [endpoint, n] of appended) options.onOutcome?.(endpoint, 'appended', n - (rejected.get(endpoint) ?? 0));
      for (const [endpoint, n] of rejected) options.onOutcome?.(endpoint, 'append_rejected', n);
      options.onAppended?.();
    },
  };
}
