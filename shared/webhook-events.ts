import * as v from 'valibot';
import { RecordView, ResponseView } from './answers.js';

/*
 * The webhook events: their types, what their `data` holds and how one is identified. The worker
 * appends them to the outbox after the documents they describe are stored (worker/event-outbox.ts);
 * the erasure and the dataset completion rules append theirs through the same function.
 */

/** Every event type an endpoint may subscribe to. */
export const WEBHOOK_EVENT_TYPES = ['record.created', 'response.created', 'response.updated', 'response.erased', 'record.completed'] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

/** `data` of `record.created`: the record as `GET /feedback-record/{id}` shows it, without responses (each has its own event) and without suggestions (which have none). */
export const RecordEventData = v.omit(RecordView, ['responses', 'suggestions']);
/** `data` of `response.created` / `response.updated`: the response as the read API shows it, with its record and dataset. */
export const ResponseEventData = v.object({ feedback_record_id: v.string(), feedback_dataset_id: v.string(), ...ResponseView.entries });
/** `data` of `response.erased`: which response is gone (never its values). */
export const ResponseErasedData = v.object({ feedback_response_id: v.string(), feedback_record_id: v.string(), feedback_dataset_id: v.string(), erasure_id: v.string() });
/** `data` of `record.completed`: the record with its responses, when its dataset's completion rule is met. */
export const RecordCompletedData = RecordView;

export type RecordEventData = v.InferOutput<typeof RecordEventData>;
export type ResponseEventData = v.InferOutput<typeof ResponseEventData>;
export type ResponseErasedData = v.InferOutput<typeof ResponseErasedData>;
export type RecordCompletedData = v.InferOutput<typeof RecordCompletedData>;

interface EventDataOf {
  'record.created': RecordEventData;
  'response.created': ResponseEventData;
  'response.updated': ResponseEventData;
  'response.erased': ResponseErasedData;
  'record.completed': RecordCompletedData;
}

/**
 * An event about something stored, as its producer hands it to the outbox. Events of one record
 * are delivered to an endpoint in (`seq`, type rank) order: a record's responses share its
 * ordering key, so per-response order follows.
 */
export type StoredEvent = {
  [T in WebhookEventType]: {
    readonly type: T;
    /** The acceptance order of the write (or erasure) the event describes. */
    readonly seq: number;
    /** The record the event is about: the ordering key. */
    readonly recordId: string;
    /** What the event is about within the record: the record id or a response id. */
    readonly subjectId: string;
    /** For the endpoints' dataset filters. */
    readonly datasetId: string;
    /** When it happened (acceptance time of the write), the body's `timestamp`. */
    readonly at: Date;
    readonly data: EventDataOf[T];
  };
}[WebhookEventType];

/** Ties between events of one record with the same `seq` (a record and its first response): the record first. */
export const EVENT_RANK: Readonly<Record<WebhookEventType, number>> = {
  'record.created': 0,
  'response.created': 1,
  'response.updated': 1,
  'response.erased': 2,
  'record.completed': 3,
};

/**
 * The event's id, which is its `webhook-id`: the same whenever the same stored version is
 * described again (a job run twice), so that the outbox keeps one and receivers can dedupe.
 */
export function eventId(event: Pick<StoredEvent, 'type' | 'subjectId' | 'seq'>): string {
  return `evt_${event.type.replace('.', '_')}_${event.subjectId}_${event.seq}`;
}

/** The body sent: `{type, timestamp, data}`. */
export function eventBody(event: StoredEvent): string {
  return eventBodyText(event.type, event.at.toISOString(), event.data);
}

/** {@link eventBody} from its parts (`timestamp` as ISO 8601): the same bytes for the same JSON data. */
export function eventBodyText(type: WebhookEventType, timestamp: string, data: unknown): string {
  return JSON.stringify({ type, timestamp, data });
}
