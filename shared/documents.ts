/**
 * A record's status: `submitted` in a dataset without a completion rule (the contract's constant);
 * with a rule, `pending` until enough distinct annotators submitted, then `completed`
 * (worker/completion.ts keeps it).
 */
export const RECORD_STATUSES = ['submitted', 'pending', 'completed'] as const;
export type RecordStatus = (typeof RECORD_STATUSES)[number];

/**
 * The documents of `feedback_records` and `feedback_responses` as the worker stores them
 * (worker/documents.ts builds them) and the API reads them (api/reads.ts). Times are the API's
 * acceptance time of the write; a record is never changed after it is inserted, but for its
 * `status` (and `completed_seq`) in a dataset with a completion rule.
 */
export interface RecordDoc {
  _id: string;
  feedback_dataset_id: string;
  field_to_value: Record<string, unknown>;
  external_id?: string;
  metadata?: Record<string, unknown>;
  status: RecordStatus;
  /**
   * Under a completion rule, the acceptance order at which the record last became `completed` (the
   * newest submitted response counted then): the order and id of its `record.completed` event. Kept
   * when it goes back to pending.
   */
  completed_seq?: number;
  /** The annotator of the record's first response: the person whose words `field_to_value` may hold (erasure). Absent on records of earlier releases. */
  creator_user_id?: string;
  /** Acceptance order of the record write (erasure). Absent on records of earlier releases. */
  seq?: number;
  api_key: string;
  request_id: string;
  created_at: Date;
  updated_at: Date;
}

export interface ResponseDoc {
  _id: string;
  feedback_record_id: string;
  feedback_dataset_id: string;
  user_id: string;
  status: string;
  values: Record<string, unknown>;
  /** Acceptance order of the version stored; an update with a lower one never replaces it. */
  seq: number;
  /** Acceptance order of the version that inserted the document (absent on documents of earlier releases): a webhook event says `response.created` for that version, `response.updated` for later ones. */
  created_seq?: number;
  api_key: string;
  request_id: string;
  created_at: Date;
  updated_at: Date;
  /**
   * The response's versions, oldest first, kept by the same update as the version
   * (worker/response-history.ts): at most RESPONSE_HISTORY_MAX earlier ones (the oldest are
   * dropped first) and, when `history_has_current`, the stored version last. Documents of earlier
   * releases hold the earlier versions only; {@link earlierVersions} reads both. Absent when
   * RESPONSE_HISTORY_MAX was 0.
   */
  history?: ResponseVersionDoc[];
  /**
   * `history` ends with the stored version: the worker's next version is then appended with a
   * plain `$push`. Absent (a document of an earlier release, or one stored while
   * RESPONSE_HISTORY_MAX was 0): the next version goes through the update that rebuilds `history`.
   */
  history_has_current?: true;
}

/** The projection of a read that shows responses, not their versions: `history` can hold 20 or more copies of `values`. */
export const WITHOUT_HISTORY = { history: 0, history_has_current: 0 } as const;

/** The versions a response's stored one replaced, oldest first, whichever form its `history` has. */
export function earlierVersions(doc: Pick<ResponseDoc, 'seq' | 'history'>): ResponseVersionDoc[] {
  return (doc.history ?? []).filter((v) => v.seq < doc.seq);
}

/** One version of a response, as kept in its `history`. */
export interface ResponseVersionDoc {
  status: string;
  values: Record<string, unknown>;
  /** Acceptance order of the version. */
  seq: number;
  updated_at: Date;
  request_id: string;
}

/** A record's current suggestion for one (question, agent), in `feedback_suggestions` (worker/suggestions.ts). */
export interface SuggestionDoc {
  /** Minted from (record, question, agent): a later suggestion of the triple replaces it. */
  _id: string;
  feedback_record_id: string;
  feedback_dataset_id: string;
  question: string;
  agent: string;
  value: unknown;
  score?: number;
  /** Acceptance order of the suggestion stored; one with a lower order never replaces it. */
  seq: number;
  api_key: string;
  request_id: string;
  created_at: Date;
  updated_at: Date;
}
