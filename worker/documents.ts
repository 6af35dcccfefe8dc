import type { Document, Filter, UpdateFilter } from 'mongodb';
import type { RecordDoc, ResponseDoc } from '../shared/documents.js';
import type { DataWrite, RecordWrite, ResponseWrite, SuggestionWrite, Write } from '../shared/writes.js';

/** A validated write of any kind with its place in the acceptance order. */
export interface Sequenced<W extends Write> {
  readonly write: W;
  /** Acceptance order (shared/order-clock.ts); a higher one was accepted later. */
  readonly seq: number;
  /** Place of the write in its job. */
  readonly index: number;
}

/** A validated write of feedback (a record or a response) with its place in the acceptance order. */
export interface SequencedWrite {
  readonly write: DataWrite;
  /** Acceptance order (shared/order-clock.ts); a higher one was accepted later. */
  readonly seq: number;
  /** Place of the write in its job. */
  readonly index: number;
}

/** `seq`: the record write's acceptance order, kept with its creator so that an erasure can tell which records came before it. */
export function recordDoc(w: RecordWrite, seq?: number): RecordDoc {
  const at = new Date(w.accepted_at);
  return {
    _id: w.record_id,
    feedback_dataset_id: w.record.feedback_dataset_id,
    field_to_value: w.record.field_to_value,
    ...(w.record.external_id === undefined ? {} : { external_id: w.record.external_id }),
    ...(w.record.metadata === undefined ? {} : { metadata: w.record.metadata }),
    status: 'submitted',
    creator_user_id: w.response.user_id,
    ...(seq === undefined ? {} : { seq }),
    api_key: w.api_key,
    request_id: w.request_id,
    created_at: at,
    updated_at: at,
  };
}

/** The first response of a new record: the lowest order of its (record, annotator) pair. */
export function firstResponseDoc(item: SequencedWrite & { readonly write: RecordWrite }): ResponseDoc {
  const w = item.write;
  const at = new Date(w.accepted_at);
  return {
    _id: w.response_id,
    feedback_record_id: w.record_id,
    feedback_dataset_id: w.record.feedback_dataset_id,
    user_id: w.response.user_id,
    status: w.response.status,
    values: w.response.values,
    seq: item.seq,
    created_seq: item.seq,
    api_key: w.api_key,
    request_id: w.request_id,
    created_at: at,
    updated_at: at,
  };
}

/** A conditional upsert of one document version kept in acceptance order (`seq`): see updates.ts. */
export interface ConditionalUpdate<D> {
  readonly filter: Filter<D>;
  /** An update document, or a pipeline (worker/response-history.ts). */
  readonly update: UpdateFilter<D> | Document[];
  /**
   * What runs, without upsert, when the upsert met a duplicate key (see updates.ts); absent: the
   * same filter and update. An update whose filter is narrower than "this version or an earlier
   * one is stored" (response-history.ts: the quick form) gives the general one here, built
   * only when needed.
   */
  readonly recheck?: () => { readonly filter: Filter<D>; readonly update: UpdateFilter<D> | Document[] };
}

export type ResponseUpdate = ConditionalUpdate<ResponseDoc>;

/** A write that carries a response version: a record's first response, or a response. */
export type ResponseCarrying = SequencedWrite & { readonly write: RecordWrite | ResponseWrite };

/**
 * The conditional upsert of one response version. It matches a stored version accepted earlier,
 * or this same version (a job run twice stores it again, unchanged); when a later one is stored,
 * the filter misses and the upsert's insert of the same _id fails with a duplicate key, which the
 * caller reads as "stale" after one check (see updates.ts). `createdAt` is the time of the
 * earliest version of the pair the caller knows of.
 */
export function responseUpdate(item: ResponseCarrying, datasetId: string, createdAt: number): ResponseUpdate {
  const w = item.write;
  return {
    filter: { _id: w.response_id, seq: { $lte: item.seq } },
    update: {
      $set: { status: w.response.status, values: w.response.values, seq: item.seq, api_key: w.api_key, request_id: w.request_id, updated_at: new Date(w.accepted_at) },
      $setOnInsert: { feedback_record_id: w.record_id, feedback_dataset_id: datasetId, user_id: w.response.user_id, created_at: new Date(createdAt), created_seq: item.seq },
      // A version stored without history: `history` no longer ends with the stored one (response-history.ts).
      $unset: { history_has_current: '' },
    },
  };
}

export function isRecordWrite(item: SequencedWrite): item is SequencedWrite & { readonly write: RecordWrite } {
  return item.write.kind === 'record';
}

export function isResponseWrite(item: SequencedWrite): item is SequencedWrite & { readonly write: ResponseWrite } {
  return item.write.kind === 'response';
}

export function isSuggestionWrite(item: SequencedWrite): item is SequencedWrite & { readonly write: SuggestionWrite } {
  return item.write.kind === 'suggestion';
}

export function carriesResponse(item: SequencedWrite): item is ResponseCarrying {
  return item.write.kind === 'record' || item.write.kind === 'response';
}
