import { expect } from 'chai';
import { testConfig, TEST_KEY } from '../helpers/env.js';
import { eventually, recordBody, records, responses, startStack, type Stack } from '../helpers/stack.js';

describe('feedback end to end (API -> BullMQ -> worker -> MongoDB)', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack(testConfig());
  });
  after(async () => {
    await stack?.close();
  });

  it('stores a record and its first response with the documented fields and defaults', async () => {
    const res = await stack.post('/feedback-record', recordBody({ record: { external_id: 'conv-1:turn-3', metadata: { model: 'gpt-x' } } }));
    expect(res.status).to.equal(200);
    expect(res.body).to.have.keys(['feedback_record_id', 'feedback_response_id', 'status']);
    expect(res.body.status).to.equal('submitted');
    const rec = await eventually(() => records(stack.db).findOne({ _id: res.body.feedback_record_id }).then((d) => d ?? undefined), 10_000, 'record');
    expect(rec).to.include({ feedback_dataset_id: 'ds_test', external_id: 'conv-1:turn-3', status: 'submitted' });
    expect(rec['field_to_value']).to.deep.equal({ prompt: 'How do I reset my password?', answer: 'Go to Settings' });
    expect(rec['metadata']).to.deep.equal({ model: 'gpt-x' });
    expect(rec['created_at']).to.be.instanceOf(Date);
    expect(rec['updated_at']).to.be.instanceOf(Date);
    const rsp = await eventually(() => responses(stack.db).findOne({ _id: res.body.feedback_response_id }).then((d) => d ?? undefined), 10_000, 'response');
    expect(rsp).to.include({ feedback_record_id: res.body.feedback_record_id, feedback_dataset_id: 'ds_test', status: 'submitted', user_id: TEST_KEY.name });
    expect(rsp['values']).to.deep.equal({ helpful: 1 });
    expect(rsp['created_at']).to.be.instanceOf(Date);
  });
});
