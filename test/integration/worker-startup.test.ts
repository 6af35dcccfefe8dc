import { expect } from 'chai';
import { createServer } from 'node:net';
import { MongoClient } from 'mongodb';
import { COLLECTIONS, mongoClientOptions } from '../../shared/mongo.js';
import { IndexSetupError } from '../../worker/indexes.js';
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
