import type { Collection, Filter } from 'mongodb';
import type { RecordDoc, ResponseDoc, SuggestionDoc } from '../shared/documents.js';
import { submittedUnits, unitsByRecord, type ResponseUnit, type UnitQuery } from './response-units.js';

/*
 * The units of the agreement endpoint's options around api/response-units.ts: agents' suggestions
 * as extra observers (`include_agents`), and only the records whose status is `completed`
 * (`records=completed`). Each streams: what it holds does not grow with the dataset.
 */

/** Which agents' suggestions join the annotators: every agent, or these. */
export type AgentSelection = 'all' | readonly string[];

export interface AgreementUnitQuery extends UnitQuery {
  /** Agents whose suggestions count as observers; undefined = none. */
  readonly agents?: AgentSelection | undefined;
  /** Only records whose stored `status` is `completed` (the completion rule of issue 25 §1). */
  readonly completedOnly?: boolean | undefined;
}

export interface AgreementSources {
  readonly records: Collection<RecordDoc>;
  readonly responses: Collection<ResponseDoc>;
  readonly suggestions: Collection<SuggestionDoc>;
}

/** A record's status as the completion rule (issue 25 §1) sets it: `pending` or `completed` (`submitted` without a rule). */
type RecordStatus = Pick<RecordDoc, '_id'> & { status: string };

/** Suggestions per driver batch. */
const BATCH_SIZE = 1000;
/** Units whose records are looked up together for `records=completed`: one `$in` each. */
const COMPLETED_LOOKUP_UNITS = 500;

/**
 * A dataset's suggestions for `question` (of `agents`), grouped by record, from one cursor sorted
 * by record (index `dataset_question_record`, worker/indexes.ts), as units whose observers are agents.
 */
export async function* suggestionUnits(suggestions: Collection<SuggestionDoc>, query: { readonly datasetId: string; readonly question: string; readonly agents: AgentSelection }): AsyncGenerator<ResponseUnit, void, undefined> {
  const filter: Filter<SuggestionDoc> = {
    feedback_dataset_id: query.datasetId,
    question: query.question,
    ...(query.agents === 'all' ? {} : { agent: { $in: [...query.agents] } }),
  };
  const cursor = suggestions
    .find(filter, { projection: { _id: 0, feedback_record_id: 1, agent: 1, value: 1 }, batchSize: BATCH_SIZE })
    .sort({ feedback_dataset_id: 1, question: 1, feedback_record_id: 1 });
  yield* unitsByRecord(cursor, (doc) => ({ userId: doc.agent, value: doc.value, agent: true }));
}

/**
 * Two unit streams sorted by record id, merged into one: a record in both gets the values of
 * both. Record ids are ASCII (minted by the API), so the store's byte order and JavaScript's agree.
 */
export async function* mergeUnits(a: AsyncGenerator<ResponseUnit, void, undefined>, b: AsyncGenerator<ResponseUnit, void, undefined>): AsyncGenerator<ResponseUnit, void, undefined> {
  try {
    let x = await a.next();
    let y = await b.next();
    while (x.done !== true || y.done !== true) {
      if (y.done === true || (x.done !== true && x.value.recordId < y.value.recordId)) {
        yield x.value as ResponseUnit;
        x = await a.next();
      } else if (x.done === true || y.value.recordId < x.value.recordId) {
        yield y.value;
        y = await b.next();
      } else {
        yield { recordId: x.value.recordId, values: [...x.value.values, ...y.value.values] };
        [x, y] = await Promise.all([a.next(), b.next()]);
      }
    }
  } finally {
    await Promise.all([a.return(undefined), b.return(undefined)]);
  }
}

/** The units of records whose `status` is `completed`, looked up {@link COMPLETED_LOOKUP_UNITS} units at a time. */
export async function* completedOnly(records: Collection<RecordStatus>, units: AsyncGenerator<ResponseUnit, void, undefined>): AsyncGenerator<ResponseUnit, void, undefined> {
  let batch: ResponseUnit[] = [];
  async function* flush(): AsyncGenerator<ResponseUnit, void, undefined> {
    const filter: Filter<RecordStatus> = { _id: { $in: batch.map((u) => u.recordId) }, status: 'completed' };
    const done = new Set((await records.find(filter, { projection: { _id: 1 } }).toArray()).map((d) => d._id));
    const kept = batch.filter((u) => done.has(u.recordId));
    batch = [];
    yield* kept;
  }
  try {
    for await (const unit of units) {
      batch.push(unit);
      if (batch.length >= COMPLETED_LOOKUP_UNITS) yield* flush();
    }
    if (batch.length > 0) yield* flush();
  } finally {
    await units.return(undefined);
  }
}

/** The units of an agreement query: the annotators' submitted responses, with the options applied. */
export function agreementUnits(sources: AgreementSources, query: AgreementUnitQuery): AsyncGenerator<ResponseUnit, void, undefined> {
  let units = submittedUnits(sources.responses, query);
  if (query.agents !== undefined) units = mergeUnits(units, suggestionUnits(sources.suggestions, { datasetId: query.datasetId, question: query.question, agents: query.agents }));
  if (query.completedOnly === true) units = completedOnly(sources.records as unknown as Collection<RecordStatus>, units);
  return units;
}
