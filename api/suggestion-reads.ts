import type { Collection } from 'mongodb';
import type { SuggestionView } from '../shared/answers.js';
import type { SuggestionDoc } from '../shared/documents.js';

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

/** By question, then agent: a stable order for a record's suggestions. */
function byQuestionAgent(a: SuggestionDoc, b: SuggestionDoc): number {
  return a.question < b.question ? -1 : a.question > b.question ? 1 : a.agent < b.agent ? -1 : a.agent > b.agent ? 1 : 0;
}

/**
 * The suggestions of `recordIds`, by record id (records without any are absent): one `$in`,
 * served by the index `record_question_agent` (worker/indexes.ts).
 */
export async function suggestionsOf(suggestions: Collection<SuggestionDoc>, recordIds: readonly string[]): Promise<Map<string, SuggestionView[]>> {
  const byRecord = new Map<string, SuggestionDoc[]>();
  if (recordIds.length === 0) return new Map();
  for (const doc of await suggestions.find({ feedback_record_id: { $in: [...recordIds] } }).toArray()) {
    const list = byRecord.get(doc.feedback_record_id);
    if (list === undefined) byRecord.set(doc.feedback_record_id, [doc]);
    else list.push(doc);
  }
  return new Map([...byRecord].map(([id, list]) => [id, list.sort(byQuestionAgent).map(suggestionView)]));
}
