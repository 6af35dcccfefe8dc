import type { Db } from 'mongodb';
import { COLLECTIONS } from '../shared/mongo.js';
import type { DeliveryDoc } from '../shared/webhook-outbox.js';
import type { WebhookEventType } from '../shared/webhook-events.js';
import type { ErasedResponse } from './erasure-guard.js';
import { storeCall } from './errors.js';

/*
 * An erasure's part of the webhook outbox (docs/erasure.md): the events whose body carries what
 * the erasure removes are deleted with it, whatever their delivery state: not delivered yet, they
 * would send the erased data after the erasure; delivered, the outbox would keep it for
 * WEBHOOK_KEEP_DELIVERED_S. `response.erased` events are kept: they carry ids only, and are how
 * receivers learn of the erasure. Run before the documents themselves are deleted, so that a
 * failure leaves both for the job's retry.
 */

/** Events of a response that carry its values. */
const RESPONSE_DATA_EVENTS: readonly WebhookEventType[] = ['response.created', 'response.updated'];
/** Events of a record that carry its fields (and, `record.completed`, its responses). */
const RECORD_DATA_EVENTS: readonly WebhookEventType[] = ['record.created', 'record.completed'];

export interface OutboxEraser {
  /** Deletes the events of these responses, and the `record.completed` of their records (which hold them). */
  responses(removed: readonly ErasedResponse[]): Promise<void>;
  /** Deletes the events that carry these records' fields. */
  records(recordIds: readonly string[]): Promise<void>;
}

export function createOutboxEraser(db: Db): OutboxEraser {
  const outbox = db.collection<DeliveryDoc>(COLLECTIONS.webhookOutbox);
  return {
    async responses(removed) {
      if (removed.length === 0) return;
      const responseIds = [...new Set(removed.map(({ doc }) => doc._id))];
      const recordIds = [...new Set(removed.map(({ doc }) => doc.feedback_record_id))];
      await storeCall(() =>
        outbox.deleteMany({
          $or: [
            { subject_id: { $in: responseIds }, event_type: { $in: [...RESPONSE_DATA_EVENTS] } },
            { key: { $in: recordIds }, event_type: 'record.completed' },
          ],
        }),
      );
    },
    async records(recordIds) {
      if (recordIds.length === 0) return;
      await storeCall(() => outbox.deleteMany({ key: { $in: [...recordIds] }, event_type: { $in: [...RECORD_DATA_EVENTS] } }));
    },
  };
}
