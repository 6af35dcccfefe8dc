import type { RecordStatus } from '../shared/documents.js';
import { eventId, type StoredEvent } from '../shared/webhook-events.js';
import { batchedEvent, batchLine, batchLines, lineOf, type BatchDoc, type BatchedEvent, type BatchLine } from '../shared/webhook-outbox.js';
import type { RecordWrite } from '../shared/writes.js';
import { firstResponseDoc, recordDoc } from './documents.js';
import { recordCreatedEvent, responseEvent } from './stored-events.js';

/*
 * Write lines: a store round appends a stored record write as one line of its batch, the write as
 * the worker took it from its job, instead of one event line per event it gives. Its
 * `record.created` and `response.created` are built from it when the fan-out moves the batch
 * (worker/webhook-fan-out.ts), after the burst, with the same bytes a round would have built
 * (the documents are functions of the write, its order and the record's status). The store round
 * then serializes each such write once instead of building two views and their JSON: about a
 * third of the worker's CPU for events (docs/webhooks.md#speed).
 */

/** The events a write line may stand for, in their order. */
export type WriteLineEvent = 'record.created' | 'response.created';
const WRITE_LINE_TYPES: readonly WriteLineEvent[] = ['record.created', 'response.created'];

/** A stored record write and the events it gives one endpoint, as a round hands it to the outbox. */
export interface RecordWriteEvents {
  readonly write: RecordWrite;
  readonly seq: number;
  /** The record's status as the round inserted it (the completion rule's). */
  readonly status: RecordStatus;
  /** In their order: `record.created` (the record was stored), `response.created` (its first response was inserted by this version). */
  readonly types: readonly WriteLineEvent[];
}

interface WriteLine {
  readonly w: RecordWrite;
  readonly seq: number;
  readonly status: RecordStatus;
  readonly e: readonly WriteLineEvent[];
}

/**
 * The lines standing for these of a write's events: one write line when they are both (the write
 * then holds nothing its events do not show, so an erasure that removes them removes all of it:
 * worker/erasure-outbox.ts), else an event line each. With their event counts, in their order.
 */
export function writeLines(events: RecordWriteEvents, types: readonly WriteLineEvent[]): { readonly line: string; readonly events: number }[] {
  if (types.length === WRITE_LINE_TYPES.length) {
    const line: WriteLine = { w: events.write, seq: events.seq, status: events.status, e: types };
    return [{ line: JSON.stringify(line), events: types.length }];
  }
  const wanted = new Set(types);
  return writeLineEvents({ w: events.write, seq: events.seq, status: events.status, e: WRITE_LINE_TYPES })
    .filter((e) => wanted.has(e.type as WriteLineEvent))
    .map((e) => ({ line: batchLine(e, eventId(e)), events: 1 }));
}

/** The events of a write line, as a round would have built them. */
function writeLineEvents(l: WriteLine): StoredEvent[] {
  return l.e.map((type) => (type === 'record.created' ? recordCreatedEvent({ ...recordDoc(l.w, l.seq), status: l.status }, l.seq) : responseEvent(firstResponseDoc({ write: l.w, seq: l.seq, index: 0 }), l.seq)));
}

/** The events a line of a batch stands for, as event lines, in their order. */
export function lineEvents(text: string): BatchLine[] {
  const parsed = JSON.parse(text) as BatchLine | WriteLine;
  if (!('w' in parsed)) return [parsed];
  return writeLineEvents(parsed).map((event) => lineOf(event, eventId(event)));
}

/** The events of a batch, in their order, with the bodies they are sent with. */
export function decodeBatch(doc: Pick<BatchDoc, 'z'>): BatchedEvent[] {
  return batchLines(doc).flatMap(lineEvents).map(batchedEvent);
}
