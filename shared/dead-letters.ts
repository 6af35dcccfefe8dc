import type { Collection, Db } from 'mongodb';
import * as v from 'valibot';
import { COLLECTIONS } from './mongo.js';

/** Why a write was dead-lettered. */
export const DeadLetterReason = {
  /** The job payload is not a version this worker reads, or not a job payload at all. */
  malformedJob: 'malformed_job',
  /** One write in the job fails the queue contract. */
  malformedWrite: 'malformed_write',
  /** MongoDB refuses the document for good (larger than its 16 MiB document limit, …). */
  storeRejected: 'store_rejected',
  /** A response whose record was never stored, after every attempt. */
  recordNotStored: 'record_not_stored',
  /** The job failed for good (attempts exhausted, stalled too often). */
  jobFailed: 'job_failed',
} as const;
export type DeadLetterReason = (typeof DeadLetterReason)[keyof typeof DeadLetterReason];

/** A dead letter as stored in `feedback_dead_letters`; the admin's answers are derived from it. */
export const DeadLetter = v.object({
  /** `<queue>:w:<seq>:<response id>`, or `<queue>:job:…` for whole jobs and writes of earlier releases: recording twice stores once. */
  _id: v.string(),
  reason: v.picklist(Object.values(DeadLetterReason)),
  error: v.string(),
  queue: v.string(),
  job_id: v.string(),
  write_index: v.nullable(v.pipe(v.number(), v.integer())),
  request_id: v.nullable(v.string()),
  record_id: v.nullable(v.string()),
  /**
   * The annotator of the write (its response's `user_id`), kept beside the payload so that an
   * erasure finds the letter even when `payload_json` was cut short before it; absent on letters
   * of earlier releases, of whole jobs and of suggestions and erasures.
   */
  user_id: v.exactOptional(v.nullable(v.string())),
  seq: v.nullable(v.pipe(v.number(), v.integer(), v.description('Acceptance order of the write, kept by a retry so that it cannot overwrite a later update.'))),
  /** The write (or the whole job payload) as JSON text: the store may refuse it as a document. */
  payload_json: v.string(),
  failed_at: v.date(),
});
export type DeadLetter = v.InferOutput<typeof DeadLetter>;

export interface DeadLetterStore {
  record(letter: Omit<DeadLetter, 'failed_at'>): Promise<void>;
  collection(): Collection<DeadLetter>;
}

// JSON.stringify escapes NUL, but error texts may carry it.
const stripNul = (s: string) => s.replaceAll('\0', '\\u0000');

/**
 * Longest payload_json kept, characters. A write refused for being larger than the store's
 * document limit would make its dead letter too large as well: it keeps its head only (no
 * longer JSON, so the admin shows it as text and a retry refuses it), and the error says so.
 */
export const DEAD_LETTER_PAYLOAD_MAX_CHARS = 1024 * 1024;

export function createDeadLetterStore(db: Db): DeadLetterStore {
  const col = db.collection<DeadLetter>(COLLECTIONS.deadLetters);
  return {
    async record(letter) {
      const whole = letter.payload_json.length <= DEAD_LETTER_PAYLOAD_MAX_CHARS;
      const error = stripNul(letter.error).slice(0, 2000) + (whole ? '' : ` (payload_json cut to its first ${DEAD_LETTER_PAYLOAD_MAX_CHARS} of ${letter.payload_json.length} characters)`);
      const payload_json = whole ? letter.payload_json : letter.payload_json.slice(0, DEAD_LETTER_PAYLOAD_MAX_CHARS);
      const doc = { ...letter, error, payload_json, failed_at: new Date() };
      await col.updateOne({ _id: letter._id }, { $setOnInsert: doc }, { upsert: true });
    },
    collection: () => col,
  };
}
