import type * as v from 'valibot';
import { SuggestionAcceptedBody, type WriteAnswer } from '../shared/answers.js';
import { AppError, type ErrorCode } from '../shared/errors.js';
import type { IdMinter } from '../shared/ids.js';
import { FeedbackRecordBody, FeedbackResponseBody, FeedbackSuggestionBody, type SuggestionInput } from '../shared/schemas.js';
import { type StoredSuggestion, type Write } from '../shared/writes.js';
import { erasureKind } from './erasure-kind.js';
import type { DatasetGate } from './dataset-gate.js';
import type { FeedbackTokenScope } from './feedback-tokens.js';
import type { AuthenticatedKey } from './key-verifier.js';
import { mayWriteDataset } from './scopes.js';

/*
 * The kinds of write, each declared once: its body schema, its checks (scope rule, dataset
 * definition), how its ids are minted and what the caller is told. The single endpoints, the
 * batch endpoint, feedback tokens and the OpenAPI document all read these declarations
 * (api/write-pipeline.ts runs them; api/openapi.ts documents them). A new kind of write is a new
 * entry here, its document builder in the worker (worker/documents.ts), and tests.
 */

/** A write ready to be queued, and what the caller is told once it is. */
export interface BuiltWrite<Answer = WriteAnswer> {
  readonly write: Write;
  readonly answer: Answer;
}

/** What the caller of a single write is told: the ids as queued (and a response's status). */
export function acceptedAnswer(write: Write): WriteAnswer {
  if (write.kind === 'erasure') throw new Error('an erasure is answered by its own kind (api/erasure-kind.ts)');
  if (write.kind === 'suggestion') return { feedback_record_id: write.record_id, feedback_suggestion_id: write.suggestion.suggestion_id };
  return { feedback_record_id: write.record_id, feedback_response_id: write.response_id, status: write.response.status };
}

/** Who writes, and with what: what every write of one request shares. */
export interface WriteContext {
  readonly key: AuthenticatedKey;
  /** The browser feedback token the request came with (POST /feedback-response only). */
  readonly token: FeedbackTokenScope | undefined;
  readonly requestId: string;
  readonly ids: IdMinter;
  readonly datasets: DatasetGate;
}

export interface WriteKind<Body, Answer = WriteAnswer> {
  /** The status of a single call's success and its body from the write as queued; absent = 200 with {@link acceptedAnswer}. */
  readonly accepted?: { readonly status: number; answer(write: Write): Answer };
  /** The endpoint that takes one write of this kind. */
  readonly path: `/${string}`;
  /** The idempotency fingerprint's endpoint name (a key reused on another endpoint is 409). */
  readonly endpoint: string;
  readonly schema: v.GenericSchema<unknown, Body>;
  /** Whether a browser feedback token may send it (else only API keys). */
  readonly feedbackToken: boolean;
  /** Scope and dataset checks, before anything is queued; throws the AppError the caller gets. */
  check(body: Body, wc: WriteContext): void | Promise<void>;
  /** Mints the ids (from `seed` for an idempotent call: a retry mints the same) and builds the write. */
  build(body: Body, wc: WriteContext, seed: string | undefined): BuiltWrite<Answer>;
  /** What the OpenAPI document says of its endpoint (the body schema, answers and write codes come from the rest). */
  readonly openapi: {
    readonly operationId: string;
    readonly summary: string;
    readonly description: string;
    readonly codes: readonly ErrorCode[];
    /** The success answer when it is not the 200 of the ids. */
    readonly answer?: { readonly status: number; readonly description: string; readonly json: v.GenericSchema };
    /** `admin`: only an admin key may send it. */
    readonly access?: 'admin';
  };
}

/** `POST /feedback-record`: a record of a dataset with its first response (live chatbots). */
export const recordWrite: WriteKind<FeedbackRecordBody> = {
  path: '/feedback-record',
  endpoint: 'feedback-record',
  schema: FeedbackRecordBody,
  feedbackToken: false,
  check(body, wc) {
    const datasetId = body.record.feedback_dataset_id;
    if (!mayWriteDataset(wc.key, datasetId)) {
      throw new AppError('forbidden', `this API key may not write to the dataset ${JSON.stringify(datasetId)}`);
    }
    wc.datasets.checkRecordWrite(datasetId, body.record.field_to_value, body.response, body.suggestions);
  },
  build(body, wc, seed) {
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
      ...(body.suggestions === undefined || body.suggestions.length === 0 ? {} : { suggestions: body.suggestions.map((s) => storedSuggestion(s, recordId, wc)) }),
    };
    return { write, answer: acceptedAnswer(write) };
  },
  openapi: {
    operationId: 'postFeedbackRecord',
    summary: 'Create a record and its first response',
    description:
      'Live chatbot use: one record plus its first response per call. The API mints both ids before queueing. ' +
      'Optional `suggestions`: model suggestions stored with the record, each as POST /feedback-suggestion would store it (in the order of the list: a later one for the same question and agent wins).',
    codes: ['dataset_not_found'],
  },
};

/** `POST /feedback-response`: add or update one annotator's response to an existing record. */
export const responseWrite: WriteKind<FeedbackResponseBody> = {
  path: '/feedback-response',
  endpoint: 'feedback-response',
  schema: FeedbackResponseBody,
  feedbackToken: true,
  async check(body, wc) {
    // A token's record was checked against its minting key's datasets when it was minted.
    if (wc.token === undefined) checkResponseTarget(wc, body.feedback_record_id);
    else checkTokenScope(wc.token, body);
    await wc.datasets.checkResponseWrite(body.feedback_record_id, body.response);
  },
  build(body, wc) {
    const recordId = body.feedback_record_id;
    // A token writes as its annotator only (checkTokenScope refused any other user_id).
    const userId = wc.token?.userId ?? body.response.user_id ?? wc.key.name;
    const responseId = wc.ids.responseId(recordId, userId);
    const { status, values } = body.response;
    const write: Write = {
      kind: 'response',
      request_id: wc.requestId,
      accepted_at: Date.now(),
      api_key: wc.key.name,
      record_id: recordId,
      response_id: responseId,
      response: { status, values, user_id: userId },
    };
    return { write, answer: acceptedAnswer(write) };
  },
  openapi: {
    operationId: 'postFeedbackResponse',
    summary: 'Add or update a response to an existing record',
    description:
      'Annotation tools. One response per (record, annotator): a later call for the same pair updates `status` and `values` and keeps the response id. ' +
      'A browser may call it with a feedback token (POST /feedback-tokens) instead of an API key: the token writes only its record, as its annotator ' +
      "(`user_id` is forced to the token's), and only its questions; CORS answers the origins of `CORS_ORIGINS`.",
    codes: ['record_not_found', 'dataset_not_found'],
  },
};

/** A suggestion as queued: the agent named (default the key's name), its id minted from (record, question, agent). */
function storedSuggestion(s: SuggestionInput, recordId: string, wc: WriteContext): StoredSuggestion {
  const agent = s.agent ?? wc.key.name;
  return {
    suggestion_id: wc.ids.suggestionId(recordId, s.question, agent),
    question: s.question,
    value: s.value,
    ...(s.score === undefined ? {} : { score: s.score }),
    agent,
  };
}

/** `POST /feedback-suggestion`: add or replace a model's suggestion for one question of an existing record. */
export const suggestionWrite: WriteKind<FeedbackSuggestionBody> = {
  path: '/feedback-suggestion',
  endpoint: 'feedback-suggestion',
  schema: FeedbackSuggestionBody,
  feedbackToken: false,
  async check(body, wc) {
    checkResponseTarget(wc, body.feedback_record_id);
    await wc.datasets.checkSuggestionWrite(body.feedback_record_id, body.suggestion, 'suggestion');
  },
  build(body, wc) {
    const write: Write = {
      kind: 'suggestion',
      request_id: wc.requestId,
      accepted_at: Date.now(),
      api_key: wc.key.name,
      record_id: body.feedback_record_id,
      suggestion: storedSuggestion(body.suggestion, body.feedback_record_id, wc),
    };
    return { write, answer: acceptedAnswer(write) };
  },
  openapi: {
    operationId: 'postFeedbackSuggestion',
    summary: "Add or replace a model's suggestion for one question of a record",
    description:
      'Model-assisted annotation: one current suggestion per (record, question, agent); a later call for the same triple replaces `value` and `score` and keeps the suggestion id, ' +
      'ordered and idempotent like responses (an earlier-accepted suggestion never overwrites a later one). `agent` defaults to the API key\'s name. ' +
      'With a dataset definition the question must be one of its questions and the value one a draft response could give it. ' +
      'Read back with the record (GET /feedback-record/{id}) and in the export; compared with the annotators by GET /datasets/{dataset_id}/agreement?include_agents=.',
    codes: ['record_not_found', 'dataset_not_found'],
    answer: { status: 200, description: 'The suggestion is in Redis, acknowledged, and will reach MongoDB.', json: SuggestionAcceptedBody },
  },
};

/** Every kind with an endpoint of its own, in the order the OpenAPI document lists them. */
export const WRITE_KINDS: readonly WriteKind<unknown, unknown>[] = [recordWrite, responseWrite, suggestionWrite, erasureKind];

/**
 * 404 when no record was ever accepted with the id `recordId` (its tag does not verify), 403 when
 * the key may not write to its dataset. The record may still be queued, so its dataset is read
 * from the fingerprint in its id; ids minted before fingerprints existed match no dataset: scoped
 * keys cannot answer them. Also what `POST /feedback-tokens` checks before minting.
 */
export function checkResponseTarget(wc: Pick<WriteContext, 'key' | 'ids'>, recordId: string): void {
  if (!wc.ids.isMintedRecordId(recordId)) {
    throw new AppError('record_not_found', 'no record has this feedback_record_id');
  }
  if (wc.key.datasets !== null && !wc.key.datasets.some((d) => wc.ids.datasetMatches(recordId, d))) {
    throw new AppError('forbidden', 'this API key may not write to the dataset of this record');
  }
}

/** 403 `token_out_of_scope` unless the token covers this record, annotator and every `values` key. */
function checkTokenScope(token: FeedbackTokenScope, body: FeedbackResponseBody): void {
  if (body.feedback_record_id !== token.recordId) {
    throw new AppError('token_out_of_scope', 'this feedback token may answer only the record it was made for');
  }
  if (body.response.user_id !== undefined && body.response.user_id !== token.userId) {
    throw new AppError('token_out_of_scope', `this feedback token writes as user_id ${JSON.stringify(token.userId)} only`);
  }
  if (token.questions !== null) {
    const allowed = token.questions;
    const outside = Object.keys(body.response.values).filter((name) => !allowed.includes(name));
    if (outside.length > 0) {
      throw new AppError('token_out_of_scope', `this feedback token may not answer ${outside.slice(0, 5).map((n) => JSON.stringify(n)).join(', ')}${outside.length > 5 ? ', …' : ''}`);
    }
  }
}
