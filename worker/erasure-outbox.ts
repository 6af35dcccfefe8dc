import type { Db } from 'mongodb';
import { COLLECTIONS } from '../shared/mongo.js';
import { batchLines, encodeBatch, eventLine, type BatchDoc, type BatchLine, type DeliveryDoc } from '../shared/webhook-outbox.js';
import type { WebhookEventType } from '../shared/webhook-events.js';
import { lineEvents } from './batch-lines.js';
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
 * yet moved into the outbox) are taken out of them, holding the fan-out's lock, so that no fan-out
 * copies one into the outbox while it is being removed: every batch is read and inflated, and
 * those holding a match are written again without it (a batch holds up to 500 events, deflated to
 * a few hundred bytes per event with bodies of a few KiB at most; erasures are rare, and batches
 * are few unless an endpoint is down for long: 1M events waiting are about 2,000 batches).
 */

/** Events of a response that carry its values. */
const RESPONSE_DATA_EVENTS: readonly WebhookEventType[] = ['response.created', 'response.updated'];
/** Events of a record that carry its fields (and, `record.completed`, its responses). */
const RECORD_DATA_EVENTS: readonly WebhookEventType[] = ['record.created', 'record.completed'];

export interface OutboxEraser {
  /** Deletes the events of these responses' versions below their erasure's order, and the `record.completed` of their records (which may hold them). */
  responses(removed: readonly ErasedResponse[]): Promise<void>;
  /** Deletes the events that carry these records' fields. */
  records(recordIds: readonly string[]): Promise<void>;
}

/**
 * Events of these subjects (resp. records) and types; with `below`, only those of an order under
 * it (per subject).
 */
type EventMatch = { readonly subjects?: ReadonlySet<string>; readonly below?: ReadonlyMap<string, number>; readonly records?: ReadonlySet<string>; readonly types: readonly WebhookEventType[] };

const matches = (m: EventMatch, e: Pick<BatchLine, 'subject' | 'key' | 'type' | 'seq'>) =>
  m.types.includes(e.type) && ((m.subjects?.has(e.subject) === true && e.seq < (m.below?.get(e.subject) ?? Infinity)) || m.records?.has(e.key) === true);
function filterOf(m: EventMatch) {
  if (m.subjects === undefined) return { event_type: { $in: [...m.types] }, key: { $in: [...m.records!] } };
  if (m.below === undefined) return { event_type: { $in: [...m.types] }, subject_id: { $in: [...m.subjects] } };
  // One branch per bound (an erasure's order: usually one for all).
  const byBound = new Map<number, string[]>();
  for (const subject of m.subjects) {
    const bound = m.below.get(subject) ?? Infinity;
    byBound.set(bound, [...(byBound.get(bound) ?? []), subject]);
  }
  return { $or: [...byBound].map(([bound, subjects]) => ({ event_type: { $in: [...m.types] }, subject_id: { $in: subjects }, ...(Number.isFinite(bound) ? { seq: { $lt: bound } } : {}) })) };
}

export function createOutboxEraser(db: Db, lock: FanOutLock): OutboxEraser {
  const outbox = db.collection<DeliveryDoc>(COLLECTIONS.webhookOutbox);
  const batches = db.collection<BatchDoc>(COLLECTIONS.webhookBatches);

  /** Deletes the events matching any of these, from the outbox and from the batches not moved into it yet. */
  async function erase(any: readonly EventMatch[]): Promise<void> {
    await lock.with(() =>
      storeCall(async () => {
        // A cursor of a few batches at a time: memory does not grow with the backlog.
        for await (const batch of batches.find({}, { batchSize: 20 })) {
          // A line that stands for a matching event (a write line: for two) is written again as the event lines of the others.
          let changed = false;
          const kept: string[] = [];
          let n = 0;
          for (const line of batchLines(batch)) {
            const events = lineEvents(line);
            const left = events.filter((e) => !any.some((m) => matches(m, e)));
            if (left.length === events.length) kept.push(line);
            else {
              changed = true;
              kept.push(...left.map(eventLine));
            }
            n += left.length;
          }
          if (!changed) continue;
          if (n === 0) await batches.deleteOne({ _id: batch._id });
          else await batches.updateOne({ _id: batch._id }, { $set: { z: await encodeBatch(kept), n } });
        }
        await outbox.deleteMany({ $or: any.map(filterOf) });
      }),
    );
  }

  return {
    async responses(removed) {
      if (removed.length === 0) return;
      // A response's versions below its erasure's order: a version accepted after the erasure is
      // kept, and so are its events (its job may have stored it, and appended them, while the
      // erasure was removing the older one, which then is not removed at all).
      const below = new Map<string, number>();
      for (const { doc, erasure } of removed) below.set(doc._id, Math.max(below.get(doc._id) ?? 0, erasure.seq));
      const recordIds = [...new Set(removed.map(({ doc }) => doc.feedback_record_id))];
      await erase([
        { subjects: new Set(below.keys()), below, types: RESPONSE_DATA_EVENTS },
        { records: new Set(recordIds), types: ['record.completed'] },
      ]);
    },
    async records(recordIds) {
      if (recordIds.length === 0) return;
      await erase([{ records: new Set(recordIds), types: RECORD_DATA_EVENTS }]);
    },
  };
}
