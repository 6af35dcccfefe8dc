import type { RecordView, ResponseView, SuggestionView } from './answers.js';
import type { RecordDoc, ResponseDoc, SuggestionDoc } from './documents.js';

/*
 * Stored documents as the API shows them: the read endpoints (api/reads.ts) and the webhook
 * events (worker/round-events.ts, worker/completion-events.ts) present a record, its responses
 * and its suggestions the same way, in the same order.
 */

/** A record's responses in the order the API lists them: oldest first, so that they read in the order annotators gave them. */
export function byCreation(a: ResponseDoc, b: ResponseDoc): number {
  return a.created_at.getTime() - b.created_at.getTime() || (a._id < b._id ? -1 : a._id > b._id ? 1 : 0);
}

/** A record's suggestions in the order the API lists them: by question, then agent. */
export function byQuestionAgent(a: SuggestionDoc, b: SuggestionDoc): number {
  return a.question < b.question ? -1 : a.question > b.question ? 1 : a.agent < b.agent ? -1 : a.agent > b.agent ? 1 : 0;
}

/** A stored suggestion as the read endpoints show it: the wire names, no bookkeeping (`seq`, `api_key`, `request_id`). */
export function suggestionView(doc: SuggestionDoc): SuggestionView {
  return {
    feedback_suggestion_id: doc._id,
    question: doc.question,
    agent: doc.agent,
    value: doc.value,
    ...(doc.score === undefined || doc.score === null ? {} : { score: doc.score }),
    created_at: doc.created_at.toISOString(),
    updated_at: doc.updated_at.toISOString(),
  };
}

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

/** A record with every response and suggestion it has, as `GET /feedback-record/{id}` shows it (no `suggestions` when it has none). */
export function fullRecordView(doc: RecordDoc, responses: readonly ResponseDoc[], suggestions: readonly SuggestionDoc[]): RecordView {
  return recordView(doc, [...responses].sort(byCreation), suggestions.length === 0 ? undefined : [...suggestions].sort(byQuestionAgent).map(suggestionView));
}
