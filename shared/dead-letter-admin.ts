import type { Db, Filter } from 'mongodb';
import * as v from 'valibot';
import { DeadLetter, DeadLetterReason } from './dead-letters.js';
import { encodeJob, type JobCompression } from './job-payload.js';
import { COLLECTIONS } from './mongo.js';
import { WRITE_JOB_NAME, type WriteQueues } from './queue.js';
import { queryLimit } from './schemas.js';
import { Write } from './writes.js';
import { decodeCursorText, encodeCursorText } from './cursor-text.js';

/** Most dead letters one list call returns; the default is {@link DEFAULT_LIST_LIMIT}. */
const MAX_LIST_LIMIT = 500;
const DEFAULT_LIST_LIMIT = 50;

const REASONS = Object.values(DeadLetterReason);

/**
 * The filters of a list call, as strings (query string or CLI flags): `reason`, `limit` (1-500,
 * default 50) and `cursor` (the `next_cursor` of the previous page).
 */
export const DeadLetterListQuery = v.strictObject({
  reason: v.exactOptional(v.picklist(REASONS, `must be one of ${REASONS.join(', ')}`)),
  limit: queryLimit(MAX_LIST_LIMIT, DEFAULT_LIST_LIMIT),
  cursor: v.exactOptional(
    v.pipe(v.string(), v.check((s) => decodeCursor(s) !== undefined, 'is not a cursor this service returned'), v.description('The `next_cursor` of the previous page.')),
  ),
});
export type DeadLetterListQuery = v.InferOutput<typeof DeadLetterListQuery>;

/** One dead letter in a list: everything but the payload (which may be large). */
export const DeadLetterSummary = v.object({
  id: v.string(),
  ...v.omit(DeadLetter, ['_id', 'payload_json', 'failed_at']).entries,
  failed_at: v.pipe(v.string(), v.description('ISO 8601 date-time.')),
  payload_bytes: v.pipe(v.number(), v.integer(), v.minValue(0)),
});
export type DeadLetterSummary = v.InferOutput<typeof DeadLetterSummary>;

/** One dead letter with its payload: the text as stored, and parsed when it is JSON. */
export const DeadLetterDetail = v.object({
  ...DeadLetterSummary.entries,
  payload_json: v.string(),
  payload: v.pipe(v.unknown(), v.description('`payload_json` parsed when it is JSON, else null.')),
});
export type DeadLetterDetail = v.InferOutput<typeof DeadLetterDetail>;

export const DeadLetterPage = v.object({
  items: v.array(DeadLetterSummary),
  next_cursor: v.pipe(v.nullable(v.string()), v.description('Pass as `cursor` for the next (older) page; null on the last page.')),
});
export type DeadLetterPage = v.InferOutput<typeof DeadLetterPage>;

/** A dead letter queued again: its write's new job and its acceptance order, unchanged. */
export const DeadLetterRequeued = v.object({
  outcome: v.literal('requeued'),
  id: v.string(),
  job_id: v.string(),
  seq: v.nullable(v.pipe(v.number(), v.integer())),
});
export type DeadLetterRequeued = v.InferOutput<typeof DeadLetterRequeued>;

export type RetryOutcome =
  | DeadLetterRequeued
  | { readonly outcome: 'not_found'; readonly id: string }
  | { readonly outcome: 'not_retryable'; readonly id: string; readonly error: string };

/** Redis did not take the re-queued write; the dead letter is kept. */
export class DeadLetterQueueError extends Error {
  constructor(message: string, options: { cause: unknown }) {
    super(message, options);
    this.name = 'DeadLetterQueueError';
  }
}

export interface DeadLetterAdmin {
  /** Newest first (`failed_at`, then id), filtered by reason, a page at a time. */
  list(query?: DeadLetterListQuery): Promise<DeadLetterPage>;
  get(id: string): Promise<DeadLetterDetail | undefined>;
  /**
   * Puts the write back on the queue through the normal path (the worker's upserts make a second
   * delivery harmless), keeping its acceptance order (`seq`) so that it cannot overwrite a later
   * update, then deletes the dead letter. Only single writes that pass the queue contract can be
   * retried; a whole malformed job or a malformed write is `not_retryable`.
   */
  retry(id: string): Promise<RetryOutcome>;
  /** {@link retry} for every dead letter (of `reason`, when given), oldest first. */
  retryAll(filter?: { reason?: DeadLetterReason }): Promise<RetryOutcome[]>;
  /** Deletes one; false when there was none. */
  purge(id: string): Promise<boolean>;
  /** Deletes every dead letter of `reason`, or all of them without one; returns how many. */
  purgeMany(filter?: { reason?: DeadLetterReason }): Promise<number>;
}

interface DeadLetterAdminOptions {
  readonly db: Db;
  /** The write queue retried writes go back to (the shard of their record). */
  readonly queues: Pick<WriteQueues, 'forRecord'>;
  /** How retried writes are packed (`QUEUE_COMPRESSION`); the worker reads both forms. */
  readonly compression: JobCompression;
}

function encodeCursor(letter: Pick<DeadLetter, '_id' | 'failed_at'>): string {
  return encodeCursorText([letter.failed_at.getTime(), letter._id]);
}

function decodeCursor(cursor: string): { failedAt: Date; id: string } | undefined {
  const parts = decodeCursorText(cursor);
  if (parts === undefined || parts.length !== 2) return undefined;
  const [ms, id] = parts;
  if (typeof ms !== 'number' || !Number.isSafeInteger(ms) || typeof id !== 'string') return undefined;
  return { failedAt: new Date(ms), id };
}

function toSummary(doc: DeadLetter): DeadLetterSummary {
  return {
    id: doc._id,
    reason: doc.reason,
    error: doc.error,
    queue: doc.queue,
    job_id: doc.job_id,
    write_index: doc.write_index,
    request_id: doc.request_id,
    record_id: doc.record_id,
    seq: doc.seq,
    failed_at: doc.failed_at.toISOString(),
    payload_bytes: Buffer.byteLength(doc.payload_json, 'utf8'),
  };
}

/** The write a dead letter holds, ready to queue again, or why there is none. */
function writeOf(doc: DeadLetter): { ok: true; write: Write } | { ok: false; error: string } {
  let payload: unknown;
  try {
    payload = JSON.parse(doc.payload_json);
  } catch {
    return { ok: false, error: 'payload_json is not JSON' };
  }
  if (doc.write_index === null) return { ok: false, error: `a whole job was dead-lettered (${doc.reason}), not one write: there is no single write to retry` };
  const parsed = v.safeParse(Write, payload);
  if (!parsed.success) {
    return { ok: false, error: `the write does not match the queue contract: ${parsed.issues.map((i) => `${v.getDotPath(i) ?? 'write'}: ${i.message}`).join('; ')}` };
  }
  // The seq is the write's place in the acceptance order, minted by the API that accepted it.
  // Writes queued by releases before the API minted it carry none; the worker then orders them
  // by their job id, below every write ordered by the API's clock (shared/queue.ts).
  const seq = doc.seq ?? parsed.output.seq;
  return { ok: true, write: seq === undefined ? parsed.output : { ...parsed.output, seq } };
}

/** List, inspect, retry and purge dead letters: the one implementation behind the CLI and `/admin/dead-letters`. */
export function createDeadLetterAdmin(options: DeadLetterAdminOptions): DeadLetterAdmin {
  const col = options.db.collection<DeadLetter>(COLLECTIONS.deadLetters);

  async function retry(id: string): Promise<RetryOutcome> {
    const doc = await col.findOne({ _id: id });
    if (doc === null) return { outcome: 'not_found', id };
    const found = writeOf(doc);
    if (!found.ok) return { outcome: 'not_retryable', id, error: found.error };
    let jobId: string | undefined;
    try {
      const job = await options.queues.forRecord(found.write.record_id).queue.add(WRITE_JOB_NAME, await encodeJob([found.write], options.compression));
      jobId = job.id;
    } catch (err) {
      throw new DeadLetterQueueError(`could not queue the write again: ${(err as Error).message}`, { cause: err });
    }
    // Deleted only once Redis holds the write. Should the delete fail, a second retry queues the
    // write once more, which the worker's idempotent upserts store once.
    await col.deleteOne({ _id: id });
    return { outcome: 'requeued', id, job_id: jobId ?? '', seq: found.write.seq ?? null };
  }

  return {
    async list(query = {}) {
      const limit = query.limit ?? DEFAULT_LIST_LIMIT;
      const after = query.cursor === undefined ? undefined : decodeCursor(query.cursor);
      const filter: Filter<DeadLetter> = {
        ...(query.reason === undefined ? {} : { reason: query.reason }),
        ...(after === undefined ? {} : { $or: [{ failed_at: { $lt: after.failedAt } }, { failed_at: after.failedAt, _id: { $lt: after.id } }] }),
      };
      const docs = await col.find(filter).sort({ failed_at: -1, _id: -1 }).limit(limit + 1).toArray();
      const page = docs.slice(0, limit);
      const last = page[page.length - 1];
      return { items: page.map(toSummary), next_cursor: docs.length > limit && last !== undefined ? encodeCursor(last) : null };
    },
    async get(id) {
      const doc = await col.findOne({ _id: id });
      if (doc === null) return undefined;
      let payload: unknown = null;
      try {
        payload = JSON.parse(doc.payload_json);
      } catch {
        // Shown as text only (payload_json).
      }
      return { ...toSummary(doc), payload_json: doc.payload_json, payload };
    },
    retry,
    async retryAll(filter = {}) {
      const ids = await col
        .find(filter.reason === undefined ? {} : { reason: filter.reason }, { projection: { _id: 1 } })
        .sort({ failed_at: 1, _id: 1 })
        .toArray();
      const outcomes: RetryOutcome[] = [];
      for (const { _id } of ids) outcomes.push(await retry(_id));
      return outcomes;
    },
    async purge(id) {
      const result = await col.deleteOne({ _id: id });
      return result.deletedCount > 0;
    },
    async purgeMany(filter = {}) {
      const result = await col.deleteMany(filter.reason === undefined ? {} : { reason: filter.reason });
      return result.deletedCount;
    },
  };
}
