import { expect } from 'chai';
import { createServer } from 'node:net';
import { MongoClient } from 'mongodb';
import { COLLECTIONS, mongoClientOptions } from '../../shared/mongo.js';
import { createIdMinter } from '../../shared/ids.js';
import { ensureIndexes, IndexSetupError } from '../../worker/indexes.js';
import { startWorker } from '../../worker/runtime.js';
import { testConfig } from '../helpers/env.js';
import { eventually, recordBody, records, silentLogger, startStack } from '../helpers/stack.js';

describe('worker start-up', () => {
  it('stops with one clear error when an index conflicts with an existing one, instead of retrying for ever', async () => {
    const config = testConfig();
    const client = new MongoClient(config.mongodbUri, { ...mongoClientOptions(), retryWrites: false });
    try {
      // An index of the same name on other keys: MongoDB (IndexKeySpecsConflict) and FerretDB refuse.
      await client.db(config.mongodbDatabase).collection(COLLECTIONS.records).createIndex({ external_id: 1 }, { name: 'dataset_created_id' });
      const started = startWorker(config, silentLogger);
      const err = await started.then(() => undefined, (e: unknown) => e);
      expect(err).to.be.instanceOf(IndexSetupError);
      expect((err as Error).message).to.match(/^cannot create index dataset_created_id on feedback_records: /);
    } finally {
      await client.db(config.mongodbDatabase).dropDatabase();
      await client.close();
    }
  });

  it("upgrades a store of an earlier release: the unique (record, user) index is replaced by a plain one, and a pair still has one response (its _id)", async () => {
    const config = testConfig();
    const client = new MongoClient(config.mongodbUri, { ...mongoClientOptions(), retryWrites: false });
    const db = client.db(config.mongodbDatabase);
    try {
      const responses = db.collection<{ _id: string; feedback_record_id: string; user_id: string }>(COLLECTIONS.responses);
      await responses.createIndex({ feedback_record_id: 1, user_id: 1 }, { name: 'record_user_unique', unique: true });
      await ensureIndexes(db);
      const byName = new Map((await responses.listIndexes().toArray()).map((i) => [String(i['name']), i]));
      expect([...byName.keys()]).to.not.include('record_user_unique');
      expect(byName.get('record_user')?.['key']).to.deep.equal({ feedback_record_id: 1, user_id: 1 });
      expect(byName.get('record_user')?.['unique']).to.not.equal(true);
      // Run twice (a second worker starting): nothing left to drop, no error.
      await ensureIndexes(db);
      // One response per (record, user) rests on the _id derived from the pair: a second insert of it is a duplicate.
      const ids = createIdMinter(['s'.repeat(32)]);
      const doc = { _id: ids.responseId('rec_1', 'annotator-a'), feedback_record_id: 'rec_1', user_id: 'annotator-a' };
      await responses.insertOne(doc);
      const again = await responses.insertOne({ ...doc, _id: ids.responseId('rec_1', 'annotator-a') }).then(() => undefined, (e: unknown) => e);
      expect((again as { code?: unknown }).code).to.equal(11000);
      expect(await responses.countDocuments({ feedback_record_id: 'rec_1', user_id: 'annotator-a' })).to.equal(1);
    } finally {
      await db.dropDatabase();
      await client.close();
    }
  });

  it('keeps storing when its metrics port is taken (logs the error, metrics off)', async () => {
    const blocker = createServer();
    await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', () => r()));
    const port = (blocker.address() as { port: number }).port;
    const stack = await startStack(testConfig({ WORKER_METRICS_PORT: String(port) }));
    try {
      const res = await stack.post('/feedback-record', recordBody());
      expect(res.status).to.equal(200);
      await eventually(async () => ((await records(stack.db).countDocuments({ _id: res.body.feedback_record_id })) === 1 ? true : undefined), 15_000, 'record stored');
    } finally {
      await stack.close();
      blocker.close();
    }
  });
});
