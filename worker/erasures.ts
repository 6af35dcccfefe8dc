import type { Db, Filter } from 'mongodb';
import type { DeadLetter } from '../shared/dead-letters.js';
import type { RecordDoc, ResponseDoc, SuggestionDoc } from '../shared/documents.js';
import { erasureCollection, NO_COUNTS, userHash, type ErasureCounts } from '../shared/erasures.js';
import { deleteIdempotencyEntries } from '../shared/idempotency-scan.js';
import type { IdMinter } from '../shared/ids.js';
import type { Logger } from '../shared/logger.js';
import { COLLECTIONS } from '../shared/mongo.js';
import { sleep } from '../shared/process.js';
import type { RedisClient } from '../shared/redis.js';
import type { ErasureWrite } from '../shared/writes.js';
import type { Sequenced } from './documents.js';
import type { ErasureHooks, ErasureRef } from './erasure-guard.js';
import { storeCall } from './errors.js';

/*
 * The worker's side of one erasure (docs/erasure.md). `begin` stores the tombstone (from then on
 * every store round drops the user's older writes, worker/erasure-guard.ts) and sweeps what is
 * stored below it; `finish` waits ERASURE_SETTLE_MS, so that a round of another worker process
 * that read the tombstones before this one existed has ended (and removed what it stored),
 * sweeps again, removes idempotency entries and marks the erasure done. Every step is
 * idempotent: a job retried after a crash or an outage runs them again.
 */

/** Documents read and removed per step of a sweep, so that a user with many writes never fills memory. */
const SWEEP_PAGE = 1000;

export type ErasureItem = Sequenced<ErasureWrite>;

export interface Eraser {
  /** Stores the tombstones, then removes what they cover. Run before the job's other writes. */
  begin(items: readonly ErasureItem[]): Promise<void>;
  /** After the settle delay: sweeps again, removes idempotency entries, marks each done. */
  finish(items: readonly ErasureItem[]): Promise<void>;
}

export interface EraserOptions extends ErasureHooks {
  readonly db: Db;
  readonly redis: RedisClient;
  /** `appKeyPrefix(config)`: where the API keeps idempotency entries. */
  readonly appKeyPrefix: string;
  readonly ids: IdMinter;
  readonly logger: Logger;
  /** ERASURE_SETTLE_MS: longer than a store round lasts; 0 in tests of one worker process. */
  readonly settleMs: number;
}

function escapeRegex(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

export function createEraser(options: EraserOptions): Eraser {
  const { db, logger } = options;
  const erasures = erasureCollection(db);
  const records = db.collection<RecordDoc>(COLLECTIONS.records);
  const responses = db.collection<ResponseDoc>(COLLECTIONS.responses);
  const suggestions = db.collection<SuggestionDoc>(COLLECTIONS.suggestions);
  const deadLetters = db.collection<DeadLetter>(COLLECTIONS.deadLetters);
  const completionGuards = db.collection<{ _id: string }>(COLLECTIONS.completionGuards);

  /**
   * Removes records whose responses are gone, with what hangs on them: their outbox events (the
   * hook, first), their suggestions, their completion guards (worker/completion.ts: an id and a
   * token, nothing of the user's, removed so the collection does not keep ids of records that
   * are gone). Returns how many records went.
   */
  async function removeRecords(ids: readonly string[]): Promise<number> {
    await options.removingRecords?.(ids);
    await storeCall(() => suggestions.deleteMany({ feedback_record_id: { $in: [...ids] } }));
    const removed = (await storeCall(() => records.deleteMany({ _id: { $in: [...ids] } }))).deletedCount;
    options.removedRecords?.(ids);
    await storeCall(() => completionGuards.deleteMany({ _id: { $in: [...ids] } }));
    return removed;
  }

  /**
   * Removes the responses `filter` matches, a page at a time; returns how many. Each page is
   * reported before it is deleted (`removing`: a failure there leaves it for the job's retry to
   * find) and after (`removed`). A response replaced meanwhile by a version `filter` does not match
   * (a write accepted after the erasure) stays.
   */
  async function removeResponses(filter: Filter<ResponseDoc>, erasure: ErasureRef, touched?: Set<string>): Promise<number> {
    let count = 0;
    for (;;) {
      const docs = await storeCall(() => responses.find(filter).limit(SWEEP_PAGE).toArray());
      if (docs.length === 0) return count;
      const found = docs.map((doc) => ({ doc, erasure }));
      await options.removing?.(found);
      count += (await storeCall(() => responses.deleteMany({ $and: [filter, { _id: { $in: docs.map((d) => d._id) } }] }))).deletedCount;
      for (const d of docs) touched?.add(d.feedback_record_id);
      await options.removed?.(found);
    }
  }

  /** Removes what the erasure covers that is stored now; returns the counts of this pass. */
  async function sweep({ write, seq }: ErasureItem): Promise<ErasureCounts> {
    const { user_id: userId, datasets, records: rule } = write.erasure;
    const erasure: ErasureRef = { id: write.record_id, seq, at: new Date(write.accepted_at) };
    const inDatasets = datasets === undefined ? {} : { feedback_dataset_id: { $in: datasets } };
    const counts = { ...NO_COUNTS };
    const erasedRecords: string[] = [];

    if (rule !== 'keep') {
      // Records the user created before the erasure, with every response to them.
      for (;;) {
        const page = await storeCall(() => records.find({ creator_user_id: userId, seq: { $lt: seq }, ...inDatasets }, { projection: { _id: 1 } }).limit(SWEEP_PAGE).toArray());
        if (page.length === 0) break;
        const ids = page.map((r) => r._id);
        counts.responses += await removeResponses({ feedback_record_id: { $in: ids } }, erasure);
        counts.records += await removeRecords(ids);
        erasedRecords.push(...ids);
      }
    }

    if (rule === 'keep') {
      // Kept records keep their fields but no longer name the user as their creator.
      await storeCall(() => records.updateMany({ creator_user_id: userId, seq: { $lt: seq }, ...inDatasets }, { $unset: { creator_user_id: '' } }));
    }

    const touched = new Set<string>();
    counts.responses += await removeResponses({ user_id: userId, seq: { $lt: seq }, ...inDatasets }, erasure, touched);

    // Versions of the user's responses kept later than the erasure hold earlier ones in their
    // history (RESPONSE_HISTORY_MAX): those accepted before the erasure go too.
    await storeCall(() => responses.updateMany({ user_id: userId, ...inDatasets, 'history.seq': { $lt: seq } }, { $pull: { history: { seq: { $lt: seq } } } }));
    // Their `created_at` is the time of the erased first version: it moves to the first version
    // kept (the oldest left in `history`, else the stored one). A response first written after
    // the erasure was created after its acceptance, so only older ones are touched.
    await storeCall(() =>
      responses.updateMany({ user_id: userId, ...inDatasets, seq: { $gte: seq }, created_at: { $lt: erasure.at } }, [
        { $set: { created_at: { $ifNull: [{ $min: '$history.updated_at' }, '$updated_at'] } } },
      ]),
    );

    if (rule === 'created_and_orphaned' && touched.size > 0) {
      const ids = [...touched];
      const answered = new Set(await storeCall(() => responses.distinct('feedback_record_id', { feedback_record_id: { $in: ids } })));
      const orphans = ids.filter((id) => !answered.has(id));
      if (orphans.length > 0) {
        counts.records += await removeRecords(orphans);
        erasedRecords.push(...orphans);
      }
    }

    // Dead letters of the user's writes before the erasure (by the letter's user_id, or in its
    // payload, the write as JSON text, for letters of earlier releases), and of any write to a
    // record erased here; a whole-job letter has no seq.
    const ofUser: Filter<DeadLetter>[] = [{ user_id: userId }, { payload_json: { $regex: escapeRegex(`"user_id":${JSON.stringify(userId)}`) } }];
    if (erasedRecords.length > 0) ofUser.push({ record_id: { $in: erasedRecords } });
    const letters = await storeCall(() => deadLetters.deleteMany({ $and: [{ $or: [{ seq: { $lt: seq } }, { seq: null }] }, { $or: ofUser }] }));
    counts.dead_letters += letters.deletedCount;
    return counts;
  }

  async function add(item: ErasureItem, counts: ErasureCounts, done: boolean): Promise<void> {
    const set = done ? { $set: { status: 'done' as const, finished_at: new Date() } } : {};
    await storeCall(() =>
      erasures.updateOne(
        { _id: item.write.record_id },
        {
          ...set,
          $inc: { 'removed.responses': counts.responses, 'removed.records': counts.records, 'removed.dead_letters': counts.dead_letters, 'removed.idempotency_keys': counts.idempotency_keys },
        },
      ),
    );
  }

  return {
    async begin(items) {
      for (const item of items) {
        const w = item.write;
        await storeCall(() =>
          erasures.updateOne(
            { _id: w.record_id },
            {
              $setOnInsert: {
                user_hash: userHash(w.erasure.user_id),
                datasets: w.erasure.datasets ?? null,
                records: w.erasure.records,
                seq: item.seq,
                status: 'pending',
                removed: { ...NO_COUNTS },
                api_key: w.api_key,
                request_id: w.request_id,
                requested_at: new Date(w.accepted_at),
                finished_at: null,
              },
            },
            { upsert: true },
          ),
        );
        await add(item, await sweep(item), false);
      }
    },

    async finish(items) {
      if (items.length === 0) return;
      if (options.settleMs > 0) await sleep(options.settleMs);
      for (const item of items) {
        const counts = await sweep(item);
        const { user_id: userId, datasets } = item.write.erasure;
        counts.idempotency_keys = await deleteIdempotencyEntries(options.redis, options.appKeyPrefix, ({ recordId, responseId }) => {
          if (options.ids.responseId(recordId, userId) !== responseId) return false;
          return datasets === undefined || datasets.some((d) => options.ids.datasetMatches(recordId, d));
        });
        await add(item, counts, true);
        logger.info({ erasure_id: item.write.record_id, seq: item.seq, request_id: item.write.request_id }, 'erasure done');
      }
    },
  };
}
