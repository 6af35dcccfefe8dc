import { expect } from 'chai';
import { COLLECTIONS } from '../../shared/mongo.js';
import { testConfig } from '../helpers/env.js';
import { eventually, recordBody, responses, startStack, type Stack } from '../helpers/stack.js';

describe('response history and the 16 MiB document limit (default BODY_LIMIT_BYTES)', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack(testConfig());
  });
  after(async () => {
    await stack?.close();
  });

  it('an accepted update whose document with its history would pass the limit is stored, its earlier versions dropped, not dead-lettered', async function () {
    this.timeout(120_000);
    // ~1 MiB of JSON each, ~6 MiB as BSON (small integers): the response and two of them in its
    // history would pass 16 MiB.
    const big = (n: number) => ({ v: n, a: new Array<number>(520_000).fill(0) });
    const created = await stack.post('/feedback-record', recordBody({ response: { user_id: 'ann', values: { v: 1 } } }));
    expect(created.status).to.equal(200);
    const recordId: string = created.body.feedback_record_id;
    for (const n of [2, 3]) {
      const res = await stack.post('/feedback-response', { feedback_record_id: recordId, response: { status: 'submitted', user_id: 'ann', values: big(n) } });
      expect(res.status, res.text).to.equal(200);
      // One after the other: each is stored before the next is sent, so v3 meets v2's history.
      await eventually(() => responses(stack.db).findOne({ _id: res.body.feedback_response_id, 'values.v': n }, { projection: { _id: 1 } }).then((d) => d ?? undefined), 60_000, `version ${n} stored`);
    }
    const doc = await responses(stack.db).findOne({ feedback_record_id: recordId, user_id: 'ann' }, { projection: { 'values.v': 1, 'history.seq': 1, 'history.values.v': 1 } });
    expect(doc?.['values']).to.deep.equal({ v: 3 });
    expect(doc?.['history'].map((h: { values: { v: number } }) => h.values.v)).to.deep.equal([3]);
    expect(await stack.db.collection(COLLECTIONS.deadLetters).countDocuments({})).to.equal(0);
  });
});
