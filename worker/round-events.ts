import type { Db } from 'mongodb';
import { WITHOUT_HISTORY, type RecordDoc, type RecordStatus, type ResponseDoc } from '../shared/documents.js';
import { COLLECTIONS } from '../shared/mongo.js';
import type { RecordWrite } from '../shared/writes.js';
import type { WriteLineEvent } from './batch-lines.js';
import { carriesResponse, firstResponseDoc, isRecordWrite, type SequencedWrite } from './documents.js';
import type { EventOutbox, OutboxEvent } from './event-outbox.js';
import { responseEvent } from './stored-events.js';
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

type RecordItem = SequencedWrite & { readonly write: RecordWrite };

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

  return {
    active: () => options.outbox.active(),
    async emit(round) {
      const { items } = round;
      const events: OutboxEvent[] = [];
      // A stored record write's own events go as the write itself (worker/batch-lines.ts): its documents are functions of it.
      const writes = new Map<number, { status: RecordStatus; types: WriteLineEvent[] }>();
      for (const { index, doc } of round.records) writes.set(index, { status: doc.status, types: ['record.created'] });
      for (const i of round.insertedResponses) {
        const item = items[i]!;
        if (!isRecordWrite(item)) continue;
        const known = writes.get(i);
        if (known !== undefined) known.types.push('response.created');
        // The record was stored by an earlier run of the job: its status is not known here, and no record.created is said.
        else events.push(responseEvent(firstResponseDoc(item), item.seq));
      }
      for (const [i, { status, types }] of writes) {
        const item = items[i]! as RecordItem;
        events.push({ write: item.write, seq: item.seq, status, types });
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
