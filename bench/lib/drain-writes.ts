// The writes of the drain benchmark (npm run bench:drain), built as the API builds them (ids,
// acceptance order), and the stored documents they start from, in the worker's own shapes.
import type { Db } from 'mongodb';
import { createIdMinter } from '../../shared/ids.js';
import { COLLECTIONS } from '../../shared/mongo.js';
import { createOrderClock } from '../../shared/order-clock.js';
import type { DataWrite as Write } from '../../shared/writes.js';
import type { RecordWrite, ResponseWrite } from '../../shared/writes.js';
import type { RecordDoc, ResponseDoc } from '../../shared/documents.js';
import { firstResponseDoc, recordDoc } from '../../worker/documents.js';
import { ensureIndexes } from '../../worker/indexes.js';
import { withHistory } from '../../worker/response-history.js';

/** Documents per insertMany, for seeding and for the raw passes. */
export const INSERT_BATCH = 500;
/** The dataset of every write of the drain benchmark. */
export const DRAIN_DATASET = 'bench-drain';
const DATASET = DRAIN_DATASET;

const ids = createIdMinter(['bench-drain-id-secret-0123456789']);
const clock = createOrderClock();
let requestCounter = 0;
const requestId = () => `bench-${(requestCounter++).toString(36)}`;

export function recordWrite(variant: number): RecordWrite {
  const recordId = ids.newRecordId(DATASET);
  const userId = `end-user-${variant % 1000}`;
  return {
    kind: 'record',
    request_id: requestId(),
    accepted_at: Date.now(),
    api_key: 'bench',
    record_id: recordId,
    response_id: ids.responseId(recordId, userId),
    record: {
      feedback_dataset_id: DATASET,
      field_to_value: { prompt: `How do I reset my password? (case ${variant})`, answer: 'Open Settings, then Security, then choose Reset password and follow the link we e-mail you.' },
      external_id: `conv-${variant}:turn-${(variant % 7) + 1}`,
      metadata: { model: 'gpt-x', locale: 'en' },
    },
    response: { status: 'submitted', values: { helpful: variant % 2, ranking: ['answer', 'prompt'] }, user_id: userId },
  };
}

/** A stored response that updates may target. */
interface Target {
  readonly recordId: string;
  readonly userId: string;
}

function responseWrite(target: Target, n: number): ResponseWrite {
  return {
    kind: 'response',
    request_id: requestId(),
    accepted_at: Date.now(),
    api_key: 'bench',
    record_id: target.recordId,
    response_id: ids.responseId(target.recordId, target.userId),
    response: { status: n % 3 === 0 ? 'draft' : 'submitted', values: { helpful: n % 5, comment: 'clear and correct' }, user_id: target.userId },
  };
}

/** Writes with their order minted as the API does at enqueue(). */
function withSeq<W extends Write>(w: W): W {
  return { ...w, seq: clock.next() };
}

export interface Seed {
  readonly records: RecordDoc[];
  readonly responses: ResponseDoc[];
  readonly targets: Target[];
}

/** `docs` documents in the worker's shapes: records and the first response of each. */
export function buildSeed(docs: number): Seed {
  const records: RecordDoc[] = [];
  const responses: ResponseDoc[] = [];
  const targets: Target[] = [];
  for (let i = 0; i < Math.floor(docs / 2); i++) {
    const w = withSeq(recordWrite(1_000_000 + i)) as RecordWrite;
    records.push(recordDoc(w));
    responses.push(firstResponseDoc({ write: w, seq: w.seq!, index: 0 }));
    targets.push({ recordId: w.record_id, userId: w.response.user_id });
  }
  return { records, responses, targets };
}

type MixName = 'usual' | 'annotation-heavy';
const UPDATE_SHARE: Record<MixName, number> = { usual: 0.1, 'annotation-heavy': 0.5 };

export interface Burst {
  readonly writes: (RecordWrite | ResponseWrite)[];
  /** Final seq expected per response id touched by the burst. */
  readonly finalSeq: Map<string, number>;
  readonly newRecords: number;
}

/** N writes, updates spread evenly (every 10th for usual, every other for heavy) over random seeded responses. */
export function buildBurst(n: number, mix: MixName, targets: readonly Target[]): Burst {
  const every = Math.round(1 / UPDATE_SHARE[mix]);
  const writes: (RecordWrite | ResponseWrite)[] = [];
  const finalSeq = new Map<string, number>();
  let newRecords = 0;
  for (let i = 0; i < n; i++) {
    let w: RecordWrite | ResponseWrite;
    if (i % every === every - 1) {
      const t = targets[Math.floor(Math.random() * targets.length)]!;
      w = withSeq(responseWrite(t, i));
    } else {
      w = withSeq(recordWrite(i));
      newRecords++;
    }
    writes.push(w);
    finalSeq.set(w.response_id, Math.max(finalSeq.get(w.response_id) ?? 0, w.seq!));
  }
  return { writes, finalSeq, newRecords };
}

/**
 * Stores the seed with the worker's indexes; returns the seconds it took. `history` (default: on,
 * as RESPONSE_HISTORY_MAX is by default): the responses as the worker inserts them with history on
 * (worker/response-history.ts `withHistory`); off, as it inserts them with RESPONSE_HISTORY_MAX=0.
 */
export async function seedDb(db: Db, seed: Seed, options: { readonly history?: boolean } = {}): Promise<number> {
  const started = Date.now();
  await ensureIndexes(db);
  const records = db.collection<RecordDoc>(COLLECTIONS.records);
  const responses = db.collection<ResponseDoc>(COLLECTIONS.responses);
  const stored = options.history === false ? seed.responses : seed.responses.map(withHistory);
  for (let i = 0; i < seed.records.length; i += INSERT_BATCH) {
    await records.insertMany(seed.records.slice(i, i + INSERT_BATCH), { ordered: false });
    await responses.insertMany(stored.slice(i, i + INSERT_BATCH), { ordered: false });
  }
  return (Date.now() - started) / 1000;
}
