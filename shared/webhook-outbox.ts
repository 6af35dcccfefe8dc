import { inflateRawSync } from 'node:zlib';
import { Binary } from 'mongodb';
import { deflateText } from './deflate.js';
import { EVENT_RANK, eventBodyText, type StoredEvent, type WebhookEventType } from './webhook-events.js';

/*
 * The webhook outbox's document (`webhook_outbox`, one per endpoint and event) and its keys: what
 * the worker appends (worker/event-outbox.ts), dispatches and delivers, and what the admin API
 * (shared/webhook-admin.ts) counts, lists and replays.
 */

export const DELIVERY_STATUSES = ['pending', 'queued', 'delivered', 'failed', 'held', 'superseded'] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];

/**
 * One event for one endpoint in the outbox (`webhook_outbox`). `pending`: waits in MongoDB, or is
 * in a delivery job (its record's lease in Redis, shared/webhook-leases.ts: the admin API shows it
 * `queued`; retrying with backoff); `queued`: in a job of an earlier release, which marked it here; `delivered`: 2xx; `failed`: every
 * attempt failed; `held`: a later event of a record whose earlier event failed, kept back until
 * that one is replayed; `superseded`: a later event about the same thing (the same response, or the
 * record's `record.completed`) was delivered first (several worker processes, or an erasure's event
 * appended ahead of them), so this older state is not sent (worker/webhook-delivery.ts `supersedes`).
 */
export interface DeliveryDoc {
  _id: string;
  endpoint_id: string;
  event_id: string;
  event_type: WebhookEventType;
  /** The ordering key: the record id. */
  key: string;
  /**
   * `<endpoint>|<record>` ({@link recordKey}): a record's deliveries to an endpoint, in an index of
   * one field. DocumentDB prices an index entry by the fields of its key, on every insert and every
   * status change: one string instead of a compound key is most of what the outbox costs a store
   * round (docs/webhooks.md#speed).
   */
  k: string;
  /** Only while `pending` (in flight included): `<endpoint>|<seq>|<rank>` ({@link pendingOrder}), the dispatcher's scan (sparse index). */
  q?: string;
  /** Only while `queued` by an earlier release: the endpoint, so that reconcile() finds them on a sparse index. */
  f?: string;
  /** While `queued` by an earlier release: the dispatcher pass that queued it; only that pass's delivery job sends it. */
  claim?: string;
  /** What the event is about within the record (the record or a response id); absent on deliveries appended by earlier releases. */
  subject_id?: string;
  seq: number;
  rank: number;
  dataset_id: string;
  /** The exact bytes sent and signed. */
  body: string;
  status: DeliveryStatus;
  attempts: number;
  created_at: Date;
  updated_at: Date;
  last_error?: string;
  last_status?: number;
  delivered_at?: Date;
}

/** The id of a delivery document and of its BullMQ job (no `:`, which BullMQ refuses in ids). */
export function deliveryId(endpointId: string, eventId: string): string {
  return `${endpointId}.${eventId}`;
}

/** The value of {@link DeliveryDoc.k}. */
export function recordKey(endpointId: string, recordId: string): string {
  return `${endpointId}|${recordId}`;
}

/** The value of {@link DeliveryDoc.q}: sorts as (seq, rank) within an endpoint (16 digits hold every safe integer). */
export function pendingOrder(endpointId: string, seq: number, rank: number): string {
  return `${endpointId}|${String(seq).padStart(16, '0')}|${rank}`;
}

/** Every `q` or `k` value of an endpoint (`}` follows `|`). */
export function endpointRange(endpointId: string): { $gte: string; $lt: string } {
  return { $gte: `${endpointId}|`, $lt: `${endpointId}}` };
}

/**
 * An event as a store round appends it (in a {@link BatchDoc}): what its {@link DeliveryDoc} is
 * made of when the fan-out moves it into the outbox (worker/webhook-fan-out.ts); its `_id` is
 * {@link deliveryId} of the batch's endpoint and `event_id`.
 */
export type BatchedEvent = Pick<DeliveryDoc, 'event_id' | 'event_type' | 'key' | 'seq' | 'rank' | 'dataset_id' | 'body'> & { readonly subject_id: string };

/**
 * Events appended for one endpoint by one append (a store round, an erasure's removal, a
 * completion), in their order (`webhook_batches`), deflated. One document instead of one per
 * event, and a few bytes per event instead of its whole body: the store prices a document by its
 * index entries, its fields and its bytes (compressed once more when large), so a round's events
 * cost it about a tenth as much this way (docs/webhooks.md#speed).
 */
export interface BatchDoc {
  /** `<endpoint>.<o>`: unique without a read. */
  _id: string;
  endpoint_id: string;
  /** `<endpoint>|<ms>|<process>|<n>` ({@link batchOrder}): the order the fan-out moves batches in, the order in which this process appended them. */
  o: string;
  /** How many events `z` holds. */
  n: number;
  /** The events as deflate-raw of their lines ({@link encodeBatch}, {@link decodeBatch}). */
  z: Binary;
  created_at: Date;
}

/** The value of {@link BatchDoc.o}: by time of append (ms, never decreasing within a process), then by the process's own count. */
export function batchOrder(endpointId: string, ms: number, processId: string, n: number): string {
  return `${endpointId}|${String(ms).padStart(15, '0')}|${processId}|${String(n).padStart(12, '0')}`;
}

/**
 * One event in a batch, as stored (an event line): its delivery's fields and its `data`. The body
 * is built from them when the fan-out moves the event (the same bytes as `eventBody`), so a store
 * round serializes each event's data once, and not as a string inside a string. A batch may also
 * hold write lines (worker/batch-lines.ts): a record write from which its events are built.
 */
export interface BatchLine {
  readonly id: string;
  readonly type: WebhookEventType;
  readonly key: string;
  readonly subject: string;
  readonly seq: number;
  readonly rank: number;
  readonly dataset: string;
  /** The body's `timestamp`. */
  readonly at: string;
  readonly data: unknown;
}

/** The line of an event in its batch (JSON, never holding a raw line break). */
export function batchLine(event: StoredEvent, id: string): string {
  return eventLine(lineOf(event, id));
}

/** An event's line, as an object. */
export function lineOf(event: StoredEvent, id: string): BatchLine {
  return { id, type: event.type, key: event.recordId, subject: event.subjectId, seq: event.seq, rank: EVENT_RANK[event.type], dataset: event.datasetId, at: event.at.toISOString(), data: event.data };
}

/** The text of an event line. */
export function eventLine(line: BatchLine): string {
  return JSON.stringify(line);
}

/** {@link BatchDoc.z} of these lines, in their order (level 1: the fastest; events of one round share most of their text). */
export async function encodeBatch(lines: readonly string[]): Promise<Binary> {
  return new Binary(await deflateText(lines.join('\n')));
}

/** The lines of a batch, in their order. */
export function batchLines(doc: Pick<BatchDoc, 'z'>): string[] {
  return inflateRawSync(doc.z.buffer).toString('utf8').split('\n');
}

/** An event line's event, with the body it is sent with. */
export function batchedEvent(l: BatchLine): BatchedEvent {
  return { event_id: l.id, event_type: l.type, key: l.key, subject_id: l.subject, seq: l.seq, rank: l.rank, dataset_id: l.dataset, body: eventBodyText(l.type, l.at, l.data) };
}
