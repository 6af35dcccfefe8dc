import { expect } from 'chai';
import { MongoClient, type Db } from 'mongodb';
import type { ResponseDoc } from '../../shared/documents.js';
import type { ResponseWrite } from '../../shared/writes.js';
import { erasureCollection, NO_COUNTS, userHash } from '../../shared/erasures.js';
import { COLLECTIONS, mongoClientOptions } from '../../shared/mongo.js';
import { createErasureGuard, type ErasedResponse, type ErasureGuard } from '../../worker/erasure-guard.js';
import { ensureIndexes } from '../../worker/indexes.js';
import { createFeedbackWriter } from '../../worker/writer.js';
import { uniqueName } from '../helpers/env.js';
import { sharedServices } from '../helpers/root-hooks.js';
import { silentLogger } from '../helpers/stack.js';
import { recordWrite, version } from '../helpers/writes.js';

/*
 * The race of docs/erasure.md: a store round reads the tombstones, an erasure stores its
 * tombstone and sweeps (finding nothing of the round yet), then the round stores. The round's
 * second read of the tombstones must remove what it stored, or the erasure would say done over a
 * write it never saw.
 */
describe('erasure guard: a store round that read the tombstones just before an erasure', () => {
  let client: MongoClient;
  let db: Db;
  beforeEach(async () => {
    client = new MongoClient(sharedServices().mongoUrl, { ...mongoClientOptions(), retryWrites: false });
    db = client.db(uniqueName('erasure_race').replace(/-/g, '_'));
    await ensureIndexes(db);
  });
  afterEach(async () => {
    await db.dropDatabase().catch(() => undefined);
    await client.close();
  });

  /** What the guard reported of a response it removes: when, with which erasure, and whether the response was still stored then. */
  interface Report {
    readonly moment: 'removing' | 'removed';
    readonly responseId: string;
    readonly erasureId: string;
    readonly stored: boolean;
  }

  /** A guard whose first read of the tombstones is followed, before the round goes on, by an erasure's tombstone. */
  function racingGuard(user: string, seq: number, records: 'keep' | 'created', reports: Report[]): ErasureGuard {
    const report = (moment: Report['moment']) => async (list: readonly ErasedResponse[]) => {
      for (const { doc, erasure } of list) {
        const stored = (await db.collection<ResponseDoc>(COLLECTIONS.responses).countDocuments({ _id: doc._id })) === 1;
        reports.push({ moment, responseId: doc._id, erasureId: erasure.id, stored });
      }
    };
    const real = createErasureGuard({ db, removing: report('removing'), removed: report('removed') });
    let raced = false;
    return {
      async tombstones(items) {
        const seen = await real.tombstones(items);
        if (!raced) {
          raced = true;
          await erasureCollection(db).insertOne({
            _id: `era_race_${user}`, user_hash: userHash(user), datasets: null, records, seq, status: 'pending', removed: { ...NO_COUNTS },
            api_key: 'tester', request_id: 'req-race', requested_at: new Date(), finished_at: null,
          });
        }
        return seen;
      },
      remove: (covered) => real.remove(covered),
    };
  }

  it('a response version stored by that round is removed before the round returns, reported with its erasure before and after it goes', async () => {
    await createFeedbackWriter({ db, logger: silentLogger }).write([recordWrite(1)]);
    const v2 = version(1, 1, 2);
    const reports: Report[] = [];
    const writer = createFeedbackWriter({ db, logger: silentLogger, erasures: racingGuard('ann-1', v2.seq + 1, 'keep', reports) });
    const results = await writer.write([v2]);
    expect(results.map((r) => r.kind)).to.deep.equal(['erased']);
    expect(await db.collection(COLLECTIONS.responses).countDocuments({ user_id: 'ann-1' })).to.equal(0);
    const responseId = (v2.write as ResponseWrite).response_id;
    expect(reports).to.deep.equal([
      { moment: 'removing', responseId, erasureId: 'era_race_ann-1', stored: true },
      { moment: 'removed', responseId, erasureId: 'era_race_ann-1', stored: false },
    ]);
    // A later version of the same annotator, above the tombstone, is stored.
    const v3 = { ...version(1, 1, 3), seq: v2.seq + 2 };
    expect((await writer.write([v3])).map((r) => r.kind)).to.deep.equal(['stored']);
  });

  it("a record its creator's erasure covers is removed with its responses", async () => {
    const rec = recordWrite(2);
    const reports: Report[] = [];
    const writer = createFeedbackWriter({ db, logger: silentLogger, erasures: racingGuard('end-user', rec.seq + 1, 'created', reports) });
    expect((await writer.write([rec])).map((r) => r.kind)).to.deep.equal(['erased']);
    expect(await db.collection<{ _id: string }>(COLLECTIONS.records).countDocuments({ _id: rec.write.record_id })).to.equal(0);
    expect(await db.collection(COLLECTIONS.responses).countDocuments({ feedback_record_id: rec.write.record_id })).to.equal(0);
    expect(reports.map((r) => `${r.moment} ${r.erasureId} ${r.stored}`)).to.deep.equal(['removing era_race_end-user true', 'removed era_race_end-user false']);
  });

  it('a round whose writes span an erasure: the tombstone covers its users\' writes below its order only, whatever the round\'s other orders', async () => {
    const insert = (user: string, seq: number) =>
      erasureCollection(db).insertOne({
        _id: `era_${user}_${seq}`, user_hash: userHash(user), datasets: null, records: 'keep', seq, status: 'done', removed: { ...NO_COUNTS },
        api_key: 'tester', request_id: `req-era-${seq}`, requested_at: new Date(), finished_at: new Date(),
      });
    const older = version(1, 1, 2); // ann-1, below the tombstone
    const newer = { ...version(1, 2, 3), seq: older.seq + 1000 }; // ann-2, above it
    const later = { ...version(1, 1, 4), seq: older.seq + 2000 }; // ann-1 again, above it
    await insert('ann-1', older.seq + 500);
    // Tombstones below every write of the round, and of users not in it, cover nothing here.
    await insert('ann-2', older.seq - 1);
    await insert('ann-9', older.seq + 700);
    const guard = createErasureGuard({ db });
    for (const round of [[older, newer, later], [later, newer, older]]) {
      const seen = await guard.tombstones(round);
      expect(seen.covering(older, 'ds_writer')?.id).to.equal(`era_ann-1_${older.seq + 500}`);
      expect(seen.covering(newer, 'ds_writer')).to.equal(undefined);
      expect(seen.covering(later, 'ds_writer')).to.equal(undefined);
    }
    // A round of writes all above the tombstone finds nothing to drop.
    expect((await guard.tombstones([newer, later])).covering(later, 'ds_writer')).to.equal(undefined);
  });
});
