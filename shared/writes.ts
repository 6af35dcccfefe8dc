import * as v from 'valibot';
import { AgentName, DatasetId, ErasureRecords, jsonObject, jsonValue, questionNameSchema, RECORD_MAX_SUGGESTIONS, RecordId, RecordInput, ResponseStatus, UserId, withValuesFilledUnlessDiscarded } from './schemas.js';

/*
 * The writes a job carries (the queue contract's items, shared/job-payload.ts packs them): what
 * the API validated and minted (ids, acceptance order, defaults resolved), checked again by the
 * worker one by one, because Redis data outlives a deploy. The request bodies they come from are
 * in shared/schemas.ts.
 */

/** The response part of a queued write: defaults resolved, annotator named. */
const StoredResponse = withValuesFilledUnlessDiscarded(v.strictObject({ status: ResponseStatus, values: jsonObject(3), user_id: UserId }));
type StoredResponse = v.InferOutput<typeof StoredResponse>;

const writeBase = {
  /** The API's request id, carried into the worker's logs. */
  request_id: v.pipe(v.string(), v.maxLength(200)),
  /** When the API accepted the write, ms since the epoch. */
  accepted_at: v.pipe(v.number(), v.integer(), v.minValue(0)),
  /** Name of the API key that wrote it. */
  api_key: v.pipe(v.string(), v.minLength(1), v.maxLength(64)),
  record_id: RecordId,
  /**
   * Acceptance order: set by the API on every write (shared/order-clock.ts), kept when a dead
   * letter is re-queued so that the write keeps its place. The worker stores a response version
   * only over an older `seq`. Absent only in jobs of releases before it, whose order the worker
   * derives from the job id Redis assigned.
   */
  seq: v.exactOptional(v.pipe(v.number(), v.safeInteger(), v.minValue(0))),
};

const writeCommon = { ...writeBase, response_id: v.pipe(v.string(), v.minLength(1), v.maxLength(200)) };

/** A suggestion as queued: its id minted from (record, question, agent), the agent named. */
const StoredSuggestion = v.strictObject({
  suggestion_id: v.pipe(v.string(), v.minLength(1), v.maxLength(200)),
  question: questionNameSchema(),
  value: jsonValue(5),
  score: v.exactOptional(v.pipe(v.number(), v.minValue(0), v.maxValue(1))),
  agent: AgentName,
});
export type StoredSuggestion = v.InferOutput<typeof StoredSuggestion>;

export const RecordWrite = v.strictObject({
  kind: v.literal('record'),
  ...writeCommon,
  record: RecordInput,
  response: StoredResponse,
  /** Stored with the record's acceptance order, as suggestion writes of their own would be. */
  suggestions: v.exactOptional(v.pipe(v.array(StoredSuggestion), v.maxLength(RECORD_MAX_SUGGESTIONS))),
});
export type RecordWrite = v.InferOutput<typeof RecordWrite>;

const ResponseWrite = v.strictObject({ kind: v.literal('response'), ...writeCommon, response: StoredResponse });
export type ResponseWrite = v.InferOutput<typeof ResponseWrite>;

/** A model's suggestion for one question of a stored (or queued) record. */
const SuggestionWrite = v.strictObject({ kind: v.literal('suggestion'), ...writeBase, suggestion: StoredSuggestion });
export type SuggestionWrite = v.InferOutput<typeof SuggestionWrite>;

/**
 * An erasure as queued: ordered with the writes by its `seq` like any write. `record_id` and
 * `response_id` are the erasure id (it shards and dead-letters like a write).
 */
const ErasureWrite = v.strictObject({
  kind: v.literal('erasure'),
  ...writeCommon,
  erasure: v.strictObject({ user_id: UserId, datasets: v.exactOptional(v.array(DatasetId)), records: ErasureRecords }),
});
export type ErasureWrite = v.InferOutput<typeof ErasureWrite>;

/** One write carried by a job: a record with its first response, a response to a record, a suggestion, or an erasure. */
export const Write = v.variant('kind', [RecordWrite, ResponseWrite, SuggestionWrite, ErasureWrite]);
export type Write = v.InferOutput<typeof Write>;

/** A write that stores feedback (what the worker's store round takes); an erasure is the other kind. */
export type DataWrite = RecordWrite | ResponseWrite | SuggestionWrite;

/** The id of the document a write stores or updates besides its record: its response, or its suggestion (an erasure's: its id). */
export function writeTargetId(w: Write): string {
  return w.kind === 'suggestion' ? w.suggestion.suggestion_id : w.response_id;
}
