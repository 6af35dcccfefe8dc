import { randomBytes } from 'node:crypto';
import type { Db } from 'mongodb';
import { COLLECTIONS } from '../shared/mongo.js';
import { outcomesOfBulkError } from './bulk-errors.js';
import { storeCall } from './errors.js';
import { ROUND_READ_BATCH } from './store-chunks.js';

/**
 * A record's guard (`feedback_completion_guards`, one small document per record, by record id):
 * there once a recount claimed the record, with the token of the last claim and the record's own
 * acceptance order (`rseq`, its `seq`). Why a record is claimed, and who reads the guards:
 * worker/completion.ts. Releases before 2026-11-26 claimed every record they recounted and
 * compared tokens; a claim still writes a new token, so such a worker running beside this one sees
 * it.
 */
interface GuardDoc {
  _id: string;
  token: string;
  /** The claimed record's `seq`; absent on guards of earlier releases (before 2026-11-27) and of records stored without one. */
  rseq?: number;
}

/** A record to claim: its id and, where it has one, its `seq` (RecordDoc). */
export interface ClaimedRecord {
  readonly id: string;
  readonly seq: number | undefined;
}

export interface CompletionGuards {
  /**
   * Claims `ids`: single upserts in one command, in `_id` order, so that concurrent claims lock
   * guards in the same order (no deadlock, see updates.ts). One `updateMany` of them costs the
   * stand-in's store about 0.6× the CPU, but locks the guards in the order it finds them, and two
   * rounds claiming the same records then deadlocked (PostgreSQL breaks a deadlock after a second;
   * measured with bench/completion-ab.ts, 2026-11-26).
   */
  claim(records: readonly ClaimedRecord[]): Promise<void>;
  /**
   * Those of `records` (by record id, with its `seq`) some recount claimed. Read by the range of their
   * orders (one probe of the sparse `rseq` index, which finds the guards of every record claimed
   * in that range: few, as claims are), not by their ids: on the stand-in a read of 200 ids cost
   * the store ~23 µs and the worker ~23 µs of CPU per id, the range ~4 and ~8
   * (bench/completion-costs.ts, 2026-11-27). A record's `seq` never changes, and a claim writes it,
   * so the range finds every claim of these records made by this release.
   */
  claimed(records: ReadonlyMap<string, { readonly seq: number }>): Promise<Set<string>>;
}

export function createCompletionGuards(db: Db): CompletionGuards {
  const guards = db.collection<GuardDoc>(COLLECTIONS.completionGuards);
  return {
    async claim(records) {
      const token = randomBytes(12).toString('base64url');
      let open = [...records].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
      while (open.length > 0) {
        const ops = open.map(({ id: _id, seq }) => ({ updateOne: { filter: { _id }, update: { $set: seq === undefined ? { token } : { token, rseq: seq } }, upsert: true } }));
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
    async claimed(records) {
      if (records.size === 0) return new Set();
      let low = Infinity;
      let high = -Infinity;
      for (const { seq } of records.values()) {
        if (seq < low) low = seq;
        if (seq > high) high = seq;
      }
      const docs = await storeCall(() => guards.find({ rseq: { $gte: low, $lte: high } }, { projection: { _id: 1 }, batchSize: ROUND_READ_BATCH }).toArray());
      return new Set(docs.map((g) => g._id).filter((id) => records.has(id)));
    },
  };
}
