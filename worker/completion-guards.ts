import { randomBytes } from 'node:crypto';
import type { Db } from 'mongodb';
import { COLLECTIONS } from '../shared/mongo.js';
import { outcomesOfBulkError } from './bulk-errors.js';
import { storeCall } from './errors.js';
import { ROUND_READ_BATCH } from './store-chunks.js';

/**
 * A record's guard (`feedback_completion_guards`, one small document per record, by record id):
 * there once a recount claimed the record, with the token of the last claim. Why a record is
 * claimed, and who reads the guards: worker/completion.ts. Releases before 2026-11-26 claimed
 * every record they recounted and compared tokens; a claim still writes a new token, so such a
 * worker running beside this one sees it.
 */
interface GuardDoc {
  _id: string;
  token: string;
}

export interface CompletionGuards {
  /**
   * Claims `ids`: single upserts in one command, in `_id` order, so that concurrent claims lock
   * guards in the same order (no deadlock, see updates.ts). One `updateMany` of them costs the
   * stand-in's store about 0.6× the CPU, but locks the guards in the order it finds them, and two
   * rounds claiming the same records then deadlocked (PostgreSQL breaks a deadlock after a second;
   * measured with bench/completion-ab.ts, 2026-11-26).
   */
  claim(ids: readonly string[]): Promise<void>;
  /** Those of `ids` some recount claimed. */
  claimed(ids: readonly string[]): Promise<Set<string>>;
}

export function createCompletionGuards(db: Db): CompletionGuards {
  const guards = db.collection<GuardDoc>(COLLECTIONS.completionGuards);
  return {
    async claim(ids) {
      const token = randomBytes(12).toString('base64url');
      let open = [...ids].sort();
      while (open.length > 0) {
        const ops = open.map((_id) => ({ updateOne: { filter: { _id }, update: { $set: { token } }, upsert: true } }));
        try {
          await storeCall(() => guards.bulkWrite(ops, { ordered: false }));
          return;
        } catch (err) {
          // Two recounts creating a record's guard at once: one insert loses on the unique _id. The
          // guard exists now, so that claim goes through as an update when repeated.
          const outcomes = outcomesOfBulkError(err, ops.length, { applied: (r) => r.matchedCount + r.upsertedCount, ok: 'ok', failed: (code) => (code === 11000 ? 'again' : 'refused') });
          if (outcomes === undefined || outcomes.includes('refused')) throw err;
          open = open.filter((_, k) => outcomes[k] === 'again');
        }
      }
    },
    async claimed(ids) {
      if (ids.length === 0) return new Set();
      const docs = await storeCall(() => guards.find({ _id: { $in: [...ids] } }, { projection: { _id: 1 }, batchSize: ROUND_READ_BATCH }).toArray());
      return new Set(docs.map((g) => g._id));
    },
  };
}
