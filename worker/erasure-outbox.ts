import type { Db } from 'mongodb';
import { COLLECTIONS } from '../shared/mongo.js';
import type { BatchDoc, DeliveryDoc } from '../shared/webhook-outbox.js';
import type { WebhookEventType } from '../shared/webhook-events.js';
import type { ErasedResponse } from './erasure-guard.js';
import { storeCall } from './errors.js';
import type { FanOutLock } from './fan-out-lock.js';

/*
 * An erasure's part of the webhook outbox (docs/erasure.md): the events whose body carries what
 * the erasure removes are deleted with it, whatever their delivery state: not delivered yet, they
 * would send the erased data after the erasure; delivered, the outbox would keep it for
 * WEBHOOK_KEEP_DELIVERED_S. `response.erased` events are kept: they carry ids only, and are how
 * receivers learn of the erasure. Run before the documents themselves are deleted, so that a
 * failure leaves both for the job's retry. Events still in their batches (`webhook_batches`, not
 * yet moved into the outbox) are pulled out of them, holding the fan-out's lock, so that no fan-out
 * copies one into the outbox while it is being removed (a scan of the batches: they are few, a
 * batch holding up to 500 events, and erasures rare).
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

type EventMatch = { readonly subject_id: { $in: string[] }; readonly event_type: { $in: WebhookEventType[] } } | { readonly key: { $in: string[] }; readonly event_type: { $in: WebhookEventType[] } };

export function createOutboxEraser(db: Db, lock: FanOutLock): OutboxEraser {
  const outbox = db.collection<DeliveryDoc>(COLLECTIONS.webhookOutbox);
  const batches = db.collection<BatchDoc>(COLLECTIONS.webhookBatches);

  /** Deletes the events matching any of these, from the outbox and from the batches not moved into it yet. */
  async function erase(matches: readonly EventMatch[]): Promise<void> {
    await lock.with(async () => {
      const inBatches = matches.map((m) => ({ events: { $elemMatch: m } }));
      await storeCall(() => batches.updateMany({ $or: inBatches }, { $pull: { events: { $or: [...matches] } } } as never));
      await storeCall(() => outbox.deleteMany({ $or: [...matches] }));
    });
  }

  return {
    async responses(removed) {
      if (removed.length === 0) return;
      const responseIds = [...new Set(removed.map(({ doc }) => doc._id))];
      const recordIds = [...new Set(removed.map(({ doc }) => doc.feedback_record_id))];
      await erase([
        { subject_id: { $in: responseIds }, event_type: { $in: [...RESPONSE_DATA_EVENTS] } },
        { key: { $in: recordIds }, event_type: { $in: ['record.completed'] } },
      ]);
    },
    async records(recordIds) {
      if (recordIds.length === 0) return;
      await erase([{ key: { $in: [...recordIds] }, event_type: { $in: [...RECORD_DATA_EVENTS] } }]);
    },
  };
}
