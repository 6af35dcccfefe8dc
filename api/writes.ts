import { AppError } from '../shared/errors.js';
import type { IdMinter } from '../shared/ids.js';
import type { AcceptedBody } from '../shared/answers.js';
import { type FeedbackRecordBody, type ResponseStatus, type Write } from '../shared/schemas.js';
import type { AuthenticatedKey } from './key-verifier.js';
import { mayWriteDataset } from './scopes.js';

/** A write ready to be queued, and what the caller is told once it is. */
export interface BuiltWrite {
  readonly write: Write;
  readonly answer: AcceptedBody;
}

/** Who writes, and with which id minter: what every write of one request shares. */
export interface WriteContext {
  readonly key: AuthenticatedKey;
  readonly requestId: string;
  readonly ids: IdMinter;
}

/** 403 unless the key may write to the record's dataset. */
export function checkRecordScope(key: AuthenticatedKey, body: FeedbackRecordBody): void {
  const datasetId = body.record.feedback_dataset_id;
  if (!mayWriteDataset(key, datasetId)) {
    throw new AppError('forbidden', `this API key may not write to the dataset ${JSON.stringify(datasetId)}`);
  }
}

/**
 * A record with its first response (after {@link checkRecordScope}). `seed` is set when the
 * request carries an Idempotency-Key, so that a retry after a lost answer mints the same record
 * id and the worker stores one document.
 */
export function buildRecordWrite(wc: WriteContext, body: FeedbackRecordBody, seed: string | undefined): BuiltWrite {
  const datasetId = body.record.feedback_dataset_id;
  const recordId = seed === undefined ? wc.ids.newRecordId(datasetId) : wc.ids.recordIdFromSeed(seed, datasetId);
  const userId = body.response.user_id ?? wc.key.name;
  const responseId = wc.ids.responseId(recordId, userId);
  const write: Write = {
    kind: 'record',
    request_id: wc.requestId,
    accepted_at: Date.now(),
    api_key: wc.key.name,
    record_id: recordId,
    response_id: responseId,
    record: body.record,
    response: { status: body.response.status, values: body.response.values, user_id: userId },
  };
  return { write, answer: { feedback_record_id: recordId, feedback_response_id: responseId, status: body.response.status } };
}

/**
 * 404 when no record was ever accepted with the id `recordId` (its tag does not verify), 403 when
 * the key may not write to its dataset. The record may still be queued, so its dataset is read
 * from the fingerprint in its id; ids minted before fingerprints existed match no dataset: scoped
 * keys cannot answer them.
 */
export function checkResponseTarget(wc: Pick<WriteContext, 'key' | 'ids'>, recordId: string): void {
  if (!wc.ids.isMintedRecordId(recordId)) {
    throw new AppError('record_not_found', 'no record has this feedback_record_id');
  }
  if (wc.key.datasets !== null && !wc.key.datasets.some((d) => wc.ids.datasetMatches(recordId, d))) {
    throw new AppError('forbidden', 'this API key may not write to the dataset of this record');
  }
}

/** A response to the record `recordId` (after {@link checkResponseTarget}). */
export function buildResponseWrite(wc: WriteContext, recordId: string, response: { status: ResponseStatus; values: Record<string, unknown>; user_id?: string }): BuiltWrite {
  const userId = response.user_id ?? wc.key.name;
  const responseId = wc.ids.responseId(recordId, userId);
  const write: Write = {
    kind: 'response',
    request_id: wc.requestId,
    accepted_at: Date.now(),
    api_key: wc.key.name,
    record_id: recordId,
    response_id: responseId,
    response: { status: response.status, values: response.values, user_id: userId },
  };
  return { write, answer: { feedback_record_id: recordId, feedback_response_id: responseId, status: response.status } };
}
