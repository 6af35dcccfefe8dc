import { expect } from 'chai';
import { answerIdPairs } from '../../shared/idempotency-scan.js';

describe('answerIdPairs (the ids an Idempotency-Key entry keeps, for erasure)', () => {
  const fp = 'x'.repeat(43);
  it('reads the ids of a single write and of each accepted batch item', () => {
    expect(answerIdPairs(`d:${fp}:${JSON.stringify({ feedback_record_id: 'rec_a', feedback_response_id: 'rsp_a', status: 'draft' })}`)).to.deep.equal([{ recordId: 'rec_a', responseId: 'rsp_a' }]);
    const batch = { accepted: 1, rejected: 1, items: [{ index: 0, status: 200, result: { feedback_record_id: 'rec_b', feedback_response_id: 'rsp_b', status: 'submitted' } }, { index: 1, status: 400, error: { code: 'validation_failed', message: 'm' } }] };
    expect(answerIdPairs(`d:${fp}:${JSON.stringify(batch)}`)).to.deep.equal([{ recordId: 'rec_b', responseId: 'rsp_b' }]);
  });
  it('finds nothing in a claim still running, an erasure answer or text that is not JSON', () => {
    expect(answerIdPairs(`p:${fp}`)).to.deep.equal([]);
    expect(answerIdPairs(`d:${fp}:${JSON.stringify({ erasure_id: 'era_x', status: 'pending' })}`)).to.deep.equal([]);
    expect(answerIdPairs(`d:${fp}:{not json`)).to.deep.equal([]);
  });
});
