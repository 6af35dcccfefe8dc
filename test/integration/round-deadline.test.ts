import { expect } from 'chai';
import { MongoClient, type Db } from 'mongodb';
import { COLLECTIONS, mongoClientOptions } from '../../shared/mongo.js';
import { TransientStoreError } from '../../worker/errors.js';
import { ensureIndexes } from '../../worker/indexes.js';
import { RoundDeadlineError } from '../../worker/round-watch.js';
import { createFeedbackWriter } from '../../worker/writer.js';
import { uniqueName } from '../helpers/env.js';
import { gate, holdingCall } from '../helpers/held-calls.js';
import { sharedServices } from '../helpers/root-hooks.js';
import { silentLogger } from '../helpers/stack.js';
import { recordWrite } from '../helpers/writes.js';

describe('writer: a store round whose store call never settles', () => {
  let client: MongoClient;
  let db: Db;
  before(async () => {
    client = new MongoClient(sharedServices().mongoUrl, mongoClientOptions());
    db = client.db(uniqueName('round_deadline').replace(/-/g, '_'));
    await ensureIndexes(db);
  });
  after(async () => {
    await db.dropDatabase().catch(() => undefined);
    await client.close();
  });

  it('is given up after its deadline as an outage (its jobs run again), and the rounds behind it are stored', async () => {
    // The first insert of records is held for good: the round that sends it never settles by itself.
    const g = gate();
    const writer = createFeedbackWriter({ db: holdingCall(db, COLLECTIONS.records, 'insertMany', 1, g.onHeld, g.released), logger: silentLogger, roundDeadlineMs: 400 });
    const stuck = writer.write([recordWrite(1)]).then(() => undefined, (err: unknown) => err);
    await g.held;
    // A later round: it takes its turn after the stuck one, so it waits for the deadline.
    const later = writer.write([recordWrite(2)]);
    const err = await stuck;
    expect(err).to.be.instanceOf(RoundDeadlineError);
    expect(err, 'handled as an outage: no attempt used').to.be.instanceOf(TransientStoreError);
    expect((await later).map((r) => r.kind)).to.deep.equal(['stored']);
    expect(await db.collection(COLLECTIONS.records).countDocuments({ _id: recordWrite(2).write.record_id as never })).to.equal(1);
    // The job of the round given up runs again: stored once, as any write run twice.
    expect((await writer.write([recordWrite(1)])).map((r) => r.kind)).to.deep.equal(['stored']);
    g.release();
    await new Promise((r) => setTimeout(r, 300));
    expect(await db.collection(COLLECTIONS.records).countDocuments({ _id: recordWrite(1).write.record_id as never }), 'the late insert met the stored record: one document').to.equal(1);
  });
});
