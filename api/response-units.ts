import type { Collection, Filter, FindCursor } from 'mongodb';
import type { ResponseDoc } from '../shared/documents.js';

/** One annotator's stored value for the question (undefined: the response does not answer it). */
export interface UnitValue {
  /** The annotator's `user_id`, or the agent's name when `agent` is true. */
  readonly userId: string;
  readonly value: unknown;
  /** A model's suggestion (api/agreement-units.ts), not an annotator's response. */
  readonly agent?: true;
}

/** A record's submitted responses to one question: a unit of the reliability data. */
export interface ResponseUnit {
  readonly recordId: string;
  readonly values: readonly UnitValue[];
}

export interface UnitQuery {
  readonly datasetId: string;
  /** A question name (a key name: no `.`, no leading `$`, so it is safe in a projection path). */
  readonly question: string;
  /** Only these annotators' responses; undefined = everyone's. */
  readonly annotators?: readonly string[] | undefined;
}

/** Responses per driver batch: a few hundred small projected documents. */
const BATCH_SIZE = 1000;

/**
 * The dataset's `submitted` responses that answer `question`, grouped by record, from one cursor
 * sorted by record (index `dataset_status_record`, worker/indexes.ts): a unit is complete when
 * the next record id shows, so only one record's responses are held at a time. Ending the
 * iteration early closes the cursor.
 */
export async function* submittedUnits(responses: Collection<ResponseDoc>, query: UnitQuery): AsyncGenerator<ResponseUnit, void, undefined> {
  const path = `values.${query.question}`;
  const filter: Filter<ResponseDoc> = {
    feedback_dataset_id: query.datasetId,
    status: 'submitted',
    [path]: { $exists: true },
    ...(query.annotators === undefined ? {} : { user_id: { $in: [...query.annotators] } }),
  };
  const cursor = responses
    .find(filter, { projection: { _id: 0, feedback_record_id: 1, user_id: 1, [path]: 1 }, batchSize: BATCH_SIZE })
    .sort({ feedback_dataset_id: 1, status: 1, feedback_record_id: 1 });
  yield* unitsByRecord(cursor, (doc) => ({ userId: doc.user_id, value: doc.values?.[query.question] }));
}

/**
 * Whether any `submitted` response of the dataset answers `question`, whatever the agreement's
 * filters: for a dataset without a definition only the answers show which questions exist. One
 * document looked at, through the index the units' query uses.
 */
export async function questionAnswered(responses: Collection<ResponseDoc>, datasetId: string, question: string): Promise<boolean> {
  const filter: Filter<ResponseDoc> = { feedback_dataset_id: datasetId, status: 'submitted', [`values.${question}`]: { $exists: true } };
  return (await responses.findOne(filter, { projection: { _id: 1 } })) !== null;
}

/**
 * The documents of a cursor sorted by record, grouped into one unit per record: a unit is
 * complete when the next record id shows. Ending the iteration early closes the cursor.
 */
export async function* unitsByRecord<D extends { readonly feedback_record_id: string }>(cursor: FindCursor<D>, valueOf: (doc: D) => UnitValue): AsyncGenerator<ResponseUnit, void, undefined> {
  try {
    let recordId: string | undefined;
    let values: UnitValue[] = [];
    for await (const doc of cursor) {
      if (doc.feedback_record_id !== recordId) {
        if (recordId !== undefined) yield { recordId, values };
        recordId = doc.feedback_record_id;
        values = [];
      }
      values.push(valueOf(doc));
    }
    if (recordId !== undefined) yield { recordId, values };
  } finally {
    await cursor.close();
  }
}
