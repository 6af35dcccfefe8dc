import type { Db } from 'mongodb';
import type { Logger } from '../shared/logger.js';
import { COLLECTIONS } from '../shared/mongo.js';
import { deliveryId, endpointRange, pendingOrder, recordKey, type BatchDoc, type DeliveryDoc } from '../shared/webhook-outbox.js';
import { decodeBatch } from './batch-lines.js';
import type { FanOutLock } from './fan-out-lock.js';
import { insertNew } from './inserts.js';
import { STORE_CHUNK_DOCS } from './store-chunks.js';

/**
 * Most deliveries per insert command of a fan-out, one command after another (see `moveOne`).
 * At most {@link STORE_CHUNK_DOCS}, so that `insertNew` sends each slice as one command; smaller than
 * a batch of events (BATCH_EVENTS), as the webhook benchmarks measured it.
 */
export const FAN_OUT_COMMAND_DOCS = Math.min(250, STORE_CHUNK_DOCS);

/**
 * Moves an endpoint's events from their batches (`webhook_batches`, appended by store rounds:
 * worker/event-outbox.ts) into the outbox (`webhook_outbox`), one delivery document per event, as
 * the dispatcher needs them (worker/webhook-dispatcher.ts): the store then writes a few hundred
 * delivery documents ahead of the deliveries instead of one per event inside every store round.
 */
export interface WebhookFanOut {
  /**
   * Moves whole batches of the endpoint, oldest first, until at least `room` events moved or none
   * is left; returns how many moved. Does nothing (0) while another process holds the fan-out lock.
   */
  move(endpointId: string, room: number): Promise<number>;
}

export function createWebhookFanOut(options: { readonly db: Db; readonly lock: FanOutLock; readonly logger: Logger }): WebhookFanOut {
  const batches = options.db.collection<BatchDoc>(COLLECTIONS.webhookBatches);
  const outbox = options.db.collection<DeliveryDoc>(COLLECTIONS.webhookOutbox);

  async function moveOne(batch: BatchDoc): Promise<number> {
    const endpointId = batch.endpoint_id;
    const now = new Date();
    const docs: DeliveryDoc[] = decodeBatch(batch).map((e) => ({
      ...e,
      _id: deliveryId(endpointId, e.event_id),
      endpoint_id: endpointId,
      k: recordKey(endpointId, e.key),
      q: pendingOrder(endpointId, e.seq, e.rank),
      status: 'pending',
      attempts: 0,
      created_at: batch.created_at,
      updated_at: now,
    }));
    // In the batch's order, one command after another: the dispatcher sends a record's earliest
    // pending event and drops one older than an event of the record already delivered, so a later
    // event of a record must never become visible before an earlier one. An event already there (a
    // job run twice appends it again; a fan-out that died before deleting its batch) is kept as it is.
    for (let i = 0; i < docs.length; i += FAN_OUT_COMMAND_DOCS) {
      const outcomes = await insertNew(outbox, docs.slice(i, i + FAN_OUT_COMMAND_DOCS));
      outcomes.forEach((o, j) => {
        if (o.kind === 'rejected') options.logger.error({ event_id: docs[i + j]!.event_id, endpoint_id: endpointId, err: o.error }, 'webhook event refused by the store; not delivered');
      });
    }
    await batches.deleteOne({ _id: batch._id });
    return docs.length;
  }

  return {
    async move(endpointId, room) {
      const moved = await options.lock.tryWith(async () => {
        let n = 0;
        while (n < room) {
          const [batch] = await batches.find({ o: endpointRange(endpointId) }).sort({ o: 1 }).limit(1).toArray();
          if (batch === undefined) break;
          n += await moveOne(batch);
        }
        return n;
      });
      return moved ?? 0;
    },
  };
}
