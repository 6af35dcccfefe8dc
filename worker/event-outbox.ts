import { randomBytes } from 'node:crypto';
import type { Binary, Db } from 'mongodb';
import type { Logger } from '../shared/logger.js';
import { COLLECTIONS } from '../shared/mongo.js';
import { batchLine, batchOrder, encodeBatch, type BatchDoc } from '../shared/webhook-outbox.js';
import { EVENT_RANK, eventId, type StoredEvent, type WebhookEventType } from '../shared/webhook-events.js';
import { writeLines, type RecordWriteEvents, type WriteLineEvent } from './batch-lines.js';
import { STORE_MAX_DOCUMENT_BYTES } from './document-size.js';
import { storeCall } from './errors.js';
import type { WebhookSubscriptions } from './webhook-subscriptions.js';

/** Events per batch document at most: a fan-out moves one batch at a time, so this is how far ahead of the deliveries it may run. */
export const BATCH_EVENTS = 500;
/** Characters of event lines per batch document at most, before deflating (deflated, well within the store's 16 MiB, so that a batch is never refused for its size). */
export const BATCH_BODY_BYTES = 8 * 1024 * 1024;
/** An event larger than this is refused alone (its body would not fit a delivery document of the store with its fields). */
const MAX_BODY_BYTES = STORE_MAX_DOCUMENT_BYTES - 64 * 1024;
/**
 * What an event's body may hold beyond its line: a write line lacks its events' envelope and
 * their views' ISO times and status (about 200 bytes).
 */
const LINE_SLACK_BYTES = 1024;

/** What a producer hands the outbox: an event, or a stored record write standing for its own events (worker/batch-lines.ts). */
export type OutboxEvent = StoredEvent | RecordWriteEvents;
const isWriteEvents = (e: OutboxEvent): e is RecordWriteEvents => 'write' in e;
const rankOf = (e: OutboxEvent): number => (isWriteEvents(e) ? EVENT_RANK[e.types[0]!] : EVENT_RANK[e.type]);

/**
 * The outbox of webhook events. A store round (an erasure's removal, a completion) appends its
 * events as one batch document per endpoint (`webhook_batches`, shared/webhook-outbox.ts
 * BatchDoc), before its jobs complete; the fan-out (worker/webhook-fan-out.ts) moves them into
 * `webhook_outbox`, one document per (endpoint, event), a few hundred ahead of the deliveries.
 * Deliveries wait in MongoDB, not in Redis.
 */
export interface EventOutbox {
  /** True when some endpoint is subscribed; producers skip building events otherwise. */
  active(): boolean;
  /** True when some endpoint takes events of this type and dataset: a producer that must read to build one asks first. */
  subscribed(type: WebhookEventType, datasetId: string): boolean;
  /**
   * Adds the events for every endpoint subscribed to them. Appends of one process are stored one
   * after another, in the order they were called, and the fan-out moves them in that order. An
   * event appended again (the same id: a job run twice) is delivered once unless its first copy
   * was already delivered and pruned. Throws TransientStoreError when MongoDB is unreachable, so
   * that the caller's round is retried.
   */
  append(events: readonly OutboxEvent[]): Promise<void>;
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
  const col = options.db.collection<BatchDoc>(COLLECTIONS.webhookBatches);
  const processId = randomBytes(6).toString('hex');
  let lastMs = 0;
  let count = 0;
  // Appends of this process, one after another: a batch is in the store before the next one is
  // given its order, so the fan-out can never move a later batch of this process before an earlier.
  let turn: Promise<unknown> = Promise.resolve();

  /** One endpoint's events of one append, as the lines of its batch with how many events they stand for. */
  type Batch = { readonly endpoint_id: string; readonly lines: string[]; readonly events: number };
  function batches(events: readonly OutboxEvent[]): { docs: Batch[]; rejected: Map<string, number> } {
    const byEndpoint = new Map<string, { line: string; bytes: number; events: number }[]>();
    const rejected = new Map<string, number>();
    const add = (endpointId: string, line: string, bytes: number, n: number) => {
      const list = byEndpoint.get(endpointId) ?? [];
      list.push({ line, bytes, events: n });
      byEndpoint.set(endpointId, list);
    };
    /** Counts a line's events as refused (only an event MongoDB cannot hold; the write itself is stored). */
    const tooLarge = (line: string, endpointIds: readonly string[], n: number, about: Record<string, unknown>): boolean => {
      // Each body holds at most the line's data and LINE_SLACK_BYTES more. The line's UTF-8 is at
      // most 3 bytes a character: counted only when that bound is not enough.
      if (line.length * 3 + LINE_SLACK_BYTES <= MAX_BODY_BYTES) return false;
      const bytes = Buffer.byteLength(line) + LINE_SLACK_BYTES;
      if (bytes <= MAX_BODY_BYTES) return false;
      for (const endpointId of endpointIds) rejected.set(endpointId, (rejected.get(endpointId) ?? 0) + n);
      options.logger.error({ ...about, bytes }, 'webhook event larger than the store holds; not delivered');
      return true;
    };
    // In the dispatcher's order, (seq, rank): a record's later event never goes before an earlier one.
    for (const event of [...events].sort((a, b) => a.seq - b.seq || rankOf(a) - rankOf(b))) {
      if (isWriteEvents(event)) {
        // One line per set of its events an endpoint takes (nearly always the same set for all).
        const wanted = new Map<string, WriteLineEvent[]>();
        for (const type of event.types) {
          for (const endpoint of options.subscriptions.matching(type, event.write.record.feedback_dataset_id)) {
            const types = wanted.get(endpoint._id);
            if (types === undefined) wanted.set(endpoint._id, [type]);
            else types.push(type);
          }
        }
        const byTypes = new Map<string, { types: WriteLineEvent[]; endpoints: string[] }>();
        for (const [endpointId, types] of wanted) {
          const key = types.join();
          const group = byTypes.get(key) ?? { types, endpoints: [] };
          group.endpoints.push(endpointId);
          byTypes.set(key, group);
        }
        for (const { types, endpoints } of byTypes.values()) {
          for (const { line, events: n } of writeLines(event, types)) {
            if (tooLarge(line, endpoints, n, { record_id: event.write.record_id, seq: event.seq, event_types: types })) continue;
            for (const endpointId of endpoints) add(endpointId, line, line.length, n);
          }
        }
        continue;
      }
      const endpoints = options.subscriptions.matching(event.type, event.datasetId).map((e) => e._id);
      if (endpoints.length === 0) continue;
      const id = eventId(event);
      const line = batchLine(event, id);
      if (tooLarge(line, endpoints, 1, { event_id: id })) continue;
      for (const endpointId of endpoints) add(endpointId, line, line.length, 1);
    }
    const docs: Batch[] = [];
    for (const [endpointId, list] of byEndpoint) {
      let current: string[] = [];
      let total = 0;
      let n = 0;
      for (const { line, bytes, events: k } of list) {
        if (current.length > 0 && (n + k > BATCH_EVENTS || total + bytes > BATCH_BODY_BYTES)) {
          docs.push({ endpoint_id: endpointId, lines: current, events: n });
          current = [];
          total = 0;
          n = 0;
        }
        current.push(line);
        total += bytes;
        n += k;
      }
      if (current.length > 0) docs.push({ endpoint_id: endpointId, lines: current, events: n });
    }
    return { docs, rejected };
  }

  async function store(docs: readonly Batch[], packed: readonly Binary[]): Promise<void> {
    const now = new Date();
    lastMs = Math.max(lastMs, now.getTime());
    const full: BatchDoc[] = docs.map((d, i) => {
      const o = batchOrder(d.endpoint_id, lastMs, processId, count++);
      return { _id: `${d.endpoint_id}.${o.slice(d.endpoint_id.length + 1).replaceAll('|', '.')}`, o, endpoint_id: d.endpoint_id, n: d.events, z: packed[i]!, created_at: now };
    });
    // Ordered: a fan-out reading meanwhile sees a prefix of them, never a later one without an earlier.
    // A retry after a partial failure appends them again under new ids: the fan-out keeps each event once.
    await storeCall(() => col.insertMany(full, { ordered: true }));
  }

  return {
    active: () => options.subscriptions.any(),
    subscribed: (type, datasetId) => options.subscriptions.matching(type, datasetId).length > 0,
    async append(events) {
      if (events.length === 0 || !options.subscriptions.any()) return;
      const { docs, rejected } = batches(events);
      for (const [endpoint, n] of rejected) options.onOutcome?.(endpoint, 'append_rejected', n);
      if (docs.length === 0) return;
      // Deflated before the turn: rounds compress side by side, and only the insert waits for the earlier append.
      const packed = await Promise.all(docs.map((d) => encodeBatch(d.lines)));
      const mine = turn.then(() => store(docs, packed));
      turn = mine.catch(() => undefined);
      await mine;
      for (const d of docs) options.onOutcome?.(d.endpoint_id, 'appended', d.events);
      options.onAppended?.();
    },
  };
}
