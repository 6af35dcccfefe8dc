import type { RecordView, ResponseView, SuggestionView } from './answers.js';
import type { RecordDoc, ResponseDoc } from './documents.js';

/*
 * Stored documents as the API shows them: the read endpoints (api/reads.ts) and the webhook
 * events (worker/round-events.ts) present a record or a response the same way.
 */

export function responseView(doc: ResponseDoc): ResponseView {
  return { feedback_response_id: doc._id, user_id: doc.user_id, status: doc.status, values: doc.values, created_at: doc.created_at.toISOString(), updated_at: doc.updated_at.toISOString() };
}

export function recordView(doc: RecordDoc, responses: readonly ResponseDoc[] | undefined, suggestions?: readonly SuggestionView[]): RecordView {
  return {
    feedback_record_id: doc._id,
    feedback_dataset_id: doc.feedback_dataset_id,
    field_to_value: doc.field_to_value,
    ...(doc.external_id === undefined ? {} : { external_id: doc.external_id }),
    ...(doc.metadata === undefined ? {} : { metadata: doc.metadata }),
    status: doc.status,
    created_at: doc.created_at.toISOString(),
    updated_at: doc.updated_at.toISOString(),
    ...(responses === undefined ? {} : { responses: responses.map(responseView) }),
    ...(suggestions === undefined ? {} : { suggestions: [...suggestions] }),
  };
}
