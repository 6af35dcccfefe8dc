import type { Db } from 'mongodb';
import { WITHOUT_HISTORY, type RecordDoc, type ResponseDoc } from '../shared/documents.js';
import { COLLECTIONS } from '../shared/mongo.js';
import { recordView, responseView } from '../shared/views.js';
import type { StoredEvent } from '../shared/webhook-events.js';
import { carriesResponse, firstResponseDoc, isRecordWrite, type SequencedWrite } from './documents.js';
import type { EventOutbox } from './event-outbox.js';
import { ROUND_READ_BATCH } from './store-chunks.js';

/** What one store round stored, by index into its writes. */
export interface RoundStored {
  readonly items: readonly SequencedWrite[];
  /**
   * Record writes whose record is stored (inserted now, or by an earlier run of the job), with the
   * document the round inserted: its `status` is the one the completion rule gave it.
   */
  readonly records: readonly { readonly index: number; readonly doc: RecordDoc }[];
  /** Record writes whose first response this round inserted: its document is known. */
  readonly insertedResponses: readonly number[];
  /**
   * Writes whose response version may be the one stored (a conditional update applied, or a
   * first response found present by a re-run): the stored document decides what is said of it.
   */
  readonly maybeStored: readonly number[];
}

/** Turns a store round into its webhook events and appends them to the outbox, before the round's jobs complete. */
export interface RoundEvents {
  /** False when no endpoint is subscribed: the writer then records nothing for events. */
  active(): boolean;
  emit(round: RoundStored): Promise<void>;
}

/**
 * Events of a round: `record.created` per stored record, `response.created` per response version
 * that inserted its document (`created_seq` is its order, so a job run twice says the same) and
 * `response.updated` per later version stored. A version found superseded by the time it is read
 * back says nothing: the later one has its own event. Writes refused or dead-lettered say nothing.
 */
export function createRoundEvents(options: { readonly db: Db; readonly outbox: EventOutbox }): RoundEvents {
  const responses = options.db.collection<ResponseDoc>(COLLECTIONS.responses);

  function responseEvent(doc: ResponseDoc, seq: number): StoredEvent {
    const data = { feedback_record_id: doc.feedback_record_id, feedback_dataset_id: doc.feedback_dataset_id, ...responseView(doc) };
    const common = { seq, recordId: doc.feedback_record_id, subjectId: doc._id, datasetId: doc.feedback_dataset_id, at: doc.updated_at, data };
    return doc.created_seq === seq ? { type: 'response.created', ...common } : { type: 'response.updated', ...common };
  }

  return {
    active: () => options.outbox.active(),
    async emit(round) {
      const { items } = round;
      const events: StoredEvent[] = [];
      for (const { index, doc } of round.records) {
        const item = items[index]!;
        events.push({ type: 'record.created', seq: item.seq, recordId: doc._id, subjectId: doc._id, datasetId: doc.feedback_dataset_id, at: doc.created_at, data: recordView(doc, undefined) });
      }
      for (const i of round.insertedResponses) {
        const item = items[i]!;
        if (isRecordWrite(item)) events.push(responseEvent(firstResponseDoc(item), item.seq));
      }
      if (round.maybeStored.length > 0) {
        // One read for the round: what an update stored is known only in part (its created_at is the first version's).
        const carrying = round.maybeStored.map((i) => items[i]!).filter(carriesResponse);
        const ids = [...new Set(carrying.map((item) => item.write.response_id))];
        const stored = new Map((await responses.find({ _id: { $in: ids } }, { projection: WITHOUT_HISTORY, batchSize: ROUND_READ_BATCH }).toArray()).map((d) => [d._id, d]));
        for (const item of carrying) {
          const doc = stored.get(item.write.response_id);
          if (doc !== undefined && doc.seq === item.seq) events.push(responseEvent(doc, item.seq));
        }
      }
      await options.outbox.append(events);
    },
  };
}
