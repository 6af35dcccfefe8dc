import { expect } from 'chai';
import { primaryDb } from '../../shared/mongo.js';
import { testConfig } from '../helpers/env.js';
import { eventually, recordBody, records, responses, startStack, type Stack } from '../helpers/stack.js';

describe('MongoDB durability settings against the store (MONGODB_WRITE_CONCERN, MONGODB_JOURNAL, MONGODB_READ_PREFERENCE)', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack(testConfig({ MONGODB_WRITE_CONCERN: 'majority', MONGODB_JOURNAL: 'true', MONGODB_READ_PREFERENCE: 'secondaryPreferred' }));
  });
  after(async () => {
    await stack?.close();
  });

  it('the worker sends its writes with w: majority and j: true, and a write is stored', async () => {
    const { client } = stack.worker!.mongo;
    expect(client.options.writeConcern).to.include({ w: 'majority', journal: true });
    expect(client.options.readPreference.mode).to.equal('secondaryPreferred');
    // Reads that decide what is written (record lookups, the order floor) ignore it.
    expect(primaryDb(stack.worker!.mongo).readPreference.mode).to.equal('primary');
    const res = await stack.post('/feedback-record', recordBody());
    expect(res.status).to.equal(200);
    await eventually(async () => ((await records(stack.db).findOne({ _id: res.body.feedback_record_id })) === null ? undefined : true), 10_000, 'the record stored');
    await eventually(async () => ((await responses(stack.db).findOne({ _id: res.body.feedback_response_id })) === null ? undefined : true), 10_000, 'the response stored');
  });
});
