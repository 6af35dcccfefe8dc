import type { Collection } from 'mongodb';
import type { SuggestionView } from '../shared/answers.js';
import type { SuggestionDoc } from '../shared/documents.js';
import { byQuestionAgent, suggestionView } from '../shared/views.js';

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
