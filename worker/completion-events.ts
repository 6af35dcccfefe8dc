import type { Db } from 'mongodb';
import { WITHOUT_HISTORY, type RecordDoc, type ResponseDoc, type SuggestionDoc } from '../shared/documents.js';
import { COLLECTIONS } from '../shared/mongo.js';
import { fullRecordView } from '../shared/views.js';
import type { StoredEvent } from '../shared/webhook-events.js';
import type { RecordCompletion } from './completion.js';
import type { EventOutbox } from './event-outbox.js';
import { ROUND_READ_BATCH } from './store-chunks.js';

/**
 * `record.completed`: one event per completion the store round's recount reports
 * (`CompletionTrackerOptions.onCompleting`), appended before the record's status is written and
 * before the round's jobs complete. Its order is the record's `completed_seq` (the write whose
 * storing completed it), so that it follows the events of the responses it counts, a job run again
 * appends the same id (kept once), and a record completed again after going back to pending gets
 * a new one. Its data is the record with its responses and suggestions as
 * `GET /feedback-record/{id}` shows it, read when the event is appended.
 */
export function createCompletionEvents(options: { readonly db: Db; readonly outbox: EventOutbox }): (completions: readonly RecordCompletion[]) => Promise<void> {
  const records = options.db.collection<RecordDoc>(COLLECTIONS.records);
  const responses = options.db.collection<ResponseDoc>(COLLECTIONS.responses);
  const suggestions = options.db.collection<SuggestionDoc>(COLLECTIONS.suggestions);

  return async (completions) => {
    // Nothing read unless some endpoint takes the event for the record's dataset.
    const wanted = completions.filter((c) => options.outbox.subscribed('record.completed', c.dataset_id));
    if (wanted.length === 0) return;
    const ids = [...new Set(wanted.map((c) => c.record_id))];
    const [recordDocs, responseDocs, suggestionDocs] = await Promise.all([
      records.find({ _id: { $in: ids } }, { batchSize: ROUND_READ_BATCH }).toArray(),
      responses.find({ feedback_record_id: { $in: ids } }, { projection: WITHOUT_HISTORY, batchSize: ROUND_READ_BATCH }).toArray(),
      suggestions.find({ feedback_record_id: { $in: ids } }, { batchSize: ROUND_READ_BATCH }).toArray(),
    ]);
    const byId = new Map(recordDocs.map((d) => [d._id, d]));
    const events: StoredEvent[] = [];
    for (const c of wanted) {
      const doc = byId.get(c.record_id);
      // Erased meanwhile: there is no record to describe.
      if (doc === undefined) continue;
      const mine = responseDocs.filter((r) => r.feedback_record_id === c.record_id);
      // The completing version's acceptance time; it may have been replaced since (then the record's).
      const at = mine.find((r) => r.seq === c.seq)?.updated_at ?? doc.updated_at;
      events.push({
        type: 'record.completed',
        seq: c.seq,
        recordId: c.record_id,
        subjectId: c.record_id,
        datasetId: c.dataset_id,
        at,
        // Its status is written after this append: the record as it reads once it is.
        data: fullRecordView({ ...doc, status: 'completed' }, mine, suggestionDocs.filter((s) => s.feedback_record_id === c.record_id)),
      });
    }
    await options.outbox.append(events);
  };
}
