import type { Db } from 'mongodb';
import type { RecordDoc, ResponseDoc } from '../../shared/documents.js';
import { COLLECTIONS } from '../../shared/mongo.js';

/** Stored documents for the read tests, inserted directly (the write path has its own tests). */
export interface SeededRecord {
  readonly record: RecordDoc;
  readonly responses: readonly ResponseDoc[];
}

export interface SeedOptions {
  readonly datasetId: string;
  readonly count: number;
  /** `created_at` of record i, ms; default: a fixed base + i. Equal values exercise the `_id` tie-break. */
  readonly createdAtMs?: (i: number) => number;
  /** Responses of record i, each with its `updated_at` in ms; default one response at the record's time. */
  readonly responseTimesMs?: (i: number, createdAtMs: number) => readonly number[];
  /** Characters of filler text in each record (an export larger than socket buffers). */
  readonly fillerChars?: number;
  /** Prefix of the ids, so that seeds of one suite never collide. */
  readonly idPrefix?: string;
}

const BASE_MS = Date.UTC(2026, 0, 1);

export function seedDocs(options: SeedOptions): SeededRecord[] {
  const prefix = options.idPrefix ?? options.datasetId;
  const filler = 'x'.repeat(options.fillerChars ?? 0);
  const out: SeededRecord[] = [];
  for (let i = 0; i < options.count; i++) {
    const createdMs = options.createdAtMs?.(i) ?? BASE_MS + i;
    // Zero-padded and shuffled by a multiplier, so `_id` order differs from insertion order.
    const id = `${prefix}-rec-${String((i * 7919) % 1_000_003).padStart(7, '0')}-${i}`;
    const created = new Date(createdMs);
    const record: RecordDoc = {
      _id: id,
      feedback_dataset_id: options.datasetId,
      field_to_value: { prompt: `question ${i}`, answer: `answer ${i}`, ...(filler === '' ? {} : { filler }) },
      metadata: { n: i },
      status: 'submitted',
      api_key: 'seed',
      request_id: `seed-${i}`,
      created_at: created,
      updated_at: created,
    };
    const times = options.responseTimesMs?.(i, createdMs) ?? [createdMs];
    const responses: ResponseDoc[] = times.map((updatedMs, j) => ({
      _id: `${id}-rsp-${j}`,
      feedback_record_id: id,
      feedback_dataset_id: options.datasetId,
      user_id: `annotator-${j}`,
      status: 'submitted',
      values: { helpful: j },
      seq: j + 1,
      api_key: 'seed',
      request_id: `seed-${i}-${j}`,
      created_at: created,
      updated_at: new Date(updatedMs),
    }));
    out.push({ record, responses });
  }
  return out;
}

/** Inserts the seeded documents in big unordered batches. */
export async function insertSeed(db: Db, seeded: readonly SeededRecord[], batch = 1000): Promise<void> {
  const records = db.collection<RecordDoc>(COLLECTIONS.records);
  const responses = db.collection<ResponseDoc>(COLLECTIONS.responses);
  for (let i = 0; i < seeded.length; i += batch) {
    const part = seeded.slice(i, i + batch);
    await records.insertMany(part.map((s) => s.record), { ordered: false });
    const rsp = part.flatMap((s) => s.responses);
    if (rsp.length > 0) await responses.insertMany(rsp, { ordered: false });
  }
}

/** What the read API should show for a seeded record: wire names, ISO times, responses oldest first. */
export function expectedView(seeded: SeededRecord, withResponses = true): Record<string, unknown> {
  const r = seeded.record;
  return {
    feedback_record_id: r._id,
    feedback_dataset_id: r.feedback_dataset_id,
    field_to_value: r.field_to_value,
    ...(r.metadata === undefined ? {} : { metadata: r.metadata }),
    status: r.status,
    created_at: r.created_at.toISOString(),
    updated_at: r.updated_at.toISOString(),
    ...(withResponses
      ? {
          responses: [...seeded.responses]
            .sort((a, b) => a.created_at.getTime() - b.created_at.getTime() || (a._id < b._id ? -1 : 1))
            .map((d) => ({ feedback_response_id: d._id, user_id: d.user_id, status: d.status, values: d.values, created_at: d.created_at.toISOString(), updated_at: d.updated_at.toISOString() })),
        }
      : {}),
  };
}

/** Sorts like the listing: (created_at, _id), ascending. */
export function byCreatedThenId(a: SeededRecord, b: SeededRecord): number {
  return a.record.created_at.getTime() - b.record.created_at.getTime() || (a.record._id < b.record._id ? -1 : a.record._id > b.record._id ? 1 : 0);
}

/**
 * A reliability data matrix (observers × units, null = no value) stored as records and responses:
 * unit u is record `<datasetId>-unit-<u>`, observer i answers it as `observers[i]` with
 * `{[question]: value}` and `status` (default submitted).
 */
export function seedReliabilityData(options: {
  readonly datasetId: string;
  readonly question: string;
  readonly observers: readonly string[];
  readonly matrix: readonly (readonly unknown[])[];
  readonly status?: string;
  /** Suffix of the response ids, so that a second matrix on the same records does not collide. */
  readonly tag?: string;
}): SeededRecord[] {
  const width = Math.max(...options.matrix.map((row) => row.length));
  return Array.from({ length: width }, (_, u) => {
    const id = `${options.datasetId}-unit-${String(u).padStart(3, '0')}`;
    const created = new Date(BASE_MS + u);
    const record: RecordDoc = { _id: id, feedback_dataset_id: options.datasetId, field_to_value: { prompt: `unit ${u}` }, status: 'submitted', api_key: 'seed', request_id: `seed-${u}`, created_at: created, updated_at: created };
    const responses = options.matrix.flatMap((row, i): ResponseDoc[] => {
      const value = row[u];
      if (value === null || value === undefined) return [];
      const userId = options.observers[i]!;
      return [{ _id: `${id}-rsp-${userId}${options.tag ?? ''}`, feedback_record_id: id, feedback_dataset_id: options.datasetId, user_id: userId, status: options.status ?? 'submitted', values: { [options.question]: value }, seq: 1, api_key: 'seed', request_id: `seed-${u}-${i}`, created_at: created, updated_at: created }];
    });
    return { record, responses };
  });
}
