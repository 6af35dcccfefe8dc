import type { Collection, Db } from 'mongodb';
import { COLLECTIONS } from './mongo.js';

/** Why a write was dead-lettered. */
export const DeadLetterReason = {
  /** The job payload is not a version this worker reads, or not a job payload at all. */
  malformedJob: 'malformed_job',
  /** One write in the job fails the queue contract. */
  malformedWrite: 'malformed_write',
  /** MongoDB refuses the document for good (FerretDB: nested arrays, NUL in strings, …). */
  storeRejected: 'store_rejected',
  /** A response whose record was never stored, after every attempt. */
  recordNotStored: 'record_not_stored',
  /** The job failed for good (attempts exhausted, stalled too often). */
  jobFailed: 'job_failed',
} as const;
export type DeadLetterReason = (typeof DeadLetterReason)[keyof typeof DeadLetterReason];

export interface DeadLetter {
  /** `<queue>:w:<seq>:<response id>`, or `<queue>:job:…` for whole jobs and writes of earlier releases: recording twice stores once. */
  readonly _id: string;
  readonly reason: DeadLetterReason;
  readonly error: string;
  readonly queue: string;
  readonly job_id: string;
  readonly write_index: number | null;
  readonly request_id: string | null;
  readonly record_id: string | null;
  /** Acceptance order of the write, kept so that a retry cannot overwrite a later update. */
  readonly seq: number | null;
  /** The write (or the whole job payload) as JSON text: the store may refuse it as a document. */
  readonly payload_json: string;
  readonly failed_at: Date;
}

export interface DeadLetterStore {
  record(letter: Omit<DeadLetter, 'failed_at'>): Promise<void>;
  collection(): Collection<DeadLetter>;
}

// FerretDB cannot store NUL in strings; JSON.stringify escapes NUL, but error texts may carry it.
const stripNul = (s: string) => s.replaceAll('\0', '\\u0000');

export function createDeadLetterStore(db: Db): DeadLetterStore {
  const col = db.collection<DeadLetter>(COLLECTIONS.deadLetters);
  return {
    async record(letter) {
      const doc = { ...letter, error: stripNul(letter.error).slice(0, 2000), failed_at: new Date() };
      await col.updateOne({ _id: letter._id }, { $setOnInsert: doc }, { upsert: true });
    },
    collection: () => col,
  };
}
