import type { RecordDoc, ResponseDoc } from '../shared/documents.js';
import { recordView, responseView } from '../shared/views.js';
import type { StoredEvent } from '../shared/webhook-events.js';

/** `record.created` of a stored record (its document as the round inserted it). */
export function recordCreatedEvent(doc: RecordDoc, seq: number): StoredEvent {
  return { type: 'record.created', seq, recordId: doc._id, subjectId: doc._id, datasetId: doc.feedback_dataset_id, at: doc.created_at, data: recordView(doc, undefined) };
}

/** `response.created` when this version inserted the response (`created_seq` is its order, so a job run twice says the same), else `response.updated`. */
export function responseEvent(doc: ResponseDoc, seq: number): StoredEvent {
  const data = { feedback_record_id: doc.feedback_record_id, feedback_dataset_id: doc.feedback_dataset_id, ...responseView(doc) };
  const common = { seq, recordId: doc.feedback_record_id, subjectId: doc._id, datasetId: doc.feedback_dataset_id, at: doc.updated_at, data };
  return doc.created_seq === seq ? { type: 'response.created', ...common } : { type: 'response.updated', ...common };
}
