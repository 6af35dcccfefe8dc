/**
 * The documents of `feedback_records` and `feedback_responses` as the worker stores them
 * (worker/documents.ts builds them) and the API reads them (api/reads.ts). Times are the API's
 * acceptance time of the write; a record is never changed after it is inserted.
 */
export interface RecordDoc {
  _id: string;
  feedback_dataset_id: string;
  field_to_value: Record<string, unknown>;
  external_id?: string;
  metadata?: Record<string, unknown>;
  status: 'submitted';
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
}
