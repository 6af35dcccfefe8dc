import { expect } from 'chai';
import { createFeedbackClient } from '../../client/index.js';
import { OTHER_KEY, testConfig, TEST_KEY } from '../helpers/env.js';
import { eventually, records, type HttpResult, type Stack, startStack } from '../helpers/stack.js';

const READER = { name: 'reader', secret: 'reader-secret-key-0004' } as const;
const ADMIN = { name: 'ops', secret: 'ops-secret-key-0003' } as const;
const API_KEYS = [TEST_KEY, OTHER_KEY, READER, ADMIN].map((k) => `${k.name}:${k.secret}`).join(',');

const DEFINITION = {
  fields: [{ name: 'prompt', type: 'text' }],
  questions: [
    { name: 'verdict', type: 'label', options: ['good', 'bad'] },
    { name: 'stars', type: 'rating', values: [1, 2, 3, 4, 5], required: false },
  ],
};

const recordOf = (datasetId: string, prompt: string, extra: Record<string, unknown> = {}) => ({
  record: { feedback_dataset_id: datasetId, field_to_value: { prompt } },
  response: { values: { verdict: 'good' }, user_id: 'first-annotator' },
  ...extra,
});

describe('POST /feedback-suggestion and suggestions on POST /feedback-record', () => {
  let stack: Stack;
  const read = (path: string): Promise<HttpResult> => stack.request(path, { headers: { Authorization: `Bearer ${READER.secret}` } });
  /** The stored record once `ready` says its suggestions are there. */
  const storedRecord = (id: string, ready: (suggestions: any[]) => boolean, what: string) =>
    eventually(async () => {
      const r = await read(`/feedback-record/${id}`);
      return r.status === 200 && ready(r.body.suggestions ?? []) ? r.body : undefined;
    }, 15_000, what);

  before(async () => {
    stack = await startStack(testConfig({ API_KEYS, READ_API_KEY_NAMES: READER.name, ADMIN_API_KEY_NAMES: ADMIN.name }));
    for (const id of ['ds_sug', 'ds_sug_agree']) {
      const put = await stack.request(`/datasets/${id}`, { method: 'PUT', headers: { Authorization: `Bearer ${ADMIN.secret}`, 'Content-Type': 'application/json' }, body: JSON.stringify(DEFINITION) });
      expect(put.status, put.text).to.equal(201);
    }
  });
  after(async () => {
    await stack?.close();
  });

  it('stores the suggestions of a record and of POST /feedback-suggestion, one per (question, agent), and reads them back with the record and in the export', async () => {
    const created = await stack.post('/feedback-record', recordOf('ds_sug', 'p1', { suggestions: [{ question: 'verdict', value: 'good', score: 0.8, agent: 'model-a' }, { question: 'stars', value: 4 }] }));
    expect(created.status, created.text).to.equal(200);
    const id: string = created.body.feedback_record_id;
    const first = await storedRecord(id, (s) => s.length === 2, 'the record and its two suggestions');
    // By question then agent; the agent defaults to the key's name.
    expect(first.suggestions.map((s: any) => [s.question, s.agent, s.value, s.score])).to.deep.equal([['stars', TEST_KEY.name, 4, undefined], ['verdict', 'model-a', 'good', 0.8]]);
    for (const internal of ['seq', 'api_key', 'request_id', '_id']) expect(first.suggestions[0], internal).to.not.have.property(internal);

    const replaced = await stack.post('/feedback-suggestion', { feedback_record_id: id, suggestion: { question: 'verdict', value: 'bad', agent: 'model-a' } });
    expect(replaced.status, replaced.text).to.equal(200);
    expect(Object.keys(replaced.body).sort()).to.deep.equal(['feedback_record_id', 'feedback_suggestion_id']);
    expect(replaced.body.feedback_record_id).to.equal(id);
    const other = await stack.post('/feedback-suggestion', { feedback_record_id: id, suggestion: { question: 'verdict', value: 'good', agent: 'model-b', score: 0.3 } });
    expect(other.status, other.text).to.equal(200);
    expect(other.body.feedback_suggestion_id).to.not.equal(replaced.body.feedback_suggestion_id);

    const after = await storedRecord(id, (s) => s.length === 3 && s.some((x) => x.agent === 'model-a' && x.value === 'bad'), 'the replaced and the new suggestion');
    const byAgent = Object.fromEntries(after.suggestions.filter((s: any) => s.question === 'verdict').map((s: any) => [s.agent, s]));
    // Replaced in place: same id, the new value, no score (the new one has none), created_at kept.
    expect(byAgent['model-a'].feedback_suggestion_id).to.equal(replaced.body.feedback_suggestion_id);
    expect(byAgent['model-a']).to.not.have.property('score');
    expect(byAgent['model-a'].created_at).to.equal(first.suggestions[1].created_at);
    expect(byAgent['model-a'].updated_at > byAgent['model-a'].created_at).to.equal(true);
    expect(byAgent['model-b']).to.include({ value: 'good', score: 0.3, feedback_suggestion_id: other.body.feedback_suggestion_id });
    // The responses are untouched.
    expect(after.responses.map((r: any) => r.user_id)).to.deep.equal(['first-annotator']);

    const exported = await read('/datasets/ds_sug/export');
    expect(exported.status).to.equal(200);
    const lines = exported.text.trim().split('\n').map((l) => JSON.parse(l));
    const line = lines.find((l) => l.feedback_record_id === id);
    expect(line.suggestions).to.deep.equal(after.suggestions);
  });

  it('refuses a bad suggestion with 400 and the path of each problem, an unknown record with 404, and queues nothing', async () => {
    const created = await stack.post('/feedback-record', recordOf('ds_sug', 'p2'));
    const id: string = created.body.feedback_record_id;
    const cases: [unknown, string, string][] = [
      [{ question: 'nope', value: 'good' }, 'suggestion.question', 'is not a question of this dataset'],
      [{ question: 'verdict', value: 'maybe' }, 'suggestion.value', 'must be one of good, bad'],
      [{ question: 'stars', value: 9 }, 'suggestion.value', 'must be one of 1, 2, 3, 4, 5'],
      [{ question: 'verdict', value: 'good', score: 1.5 }, 'suggestion.score', 'must be from 0 to 1'],
      [{ question: 'verdict' }, 'suggestion.value', 'is required'],
      [{ question: 'verdict', value: null }, 'suggestion.value', 'must not be null'],
      [{ question: 'verdict', value: 'good', agent: '' }, 'suggestion.agent', 'must not be empty'],
      [{ question: 'verdict', value: 'good', extra: 1 }, 'suggestion.extra', 'is not a known property'],
      [{ question: 'bad.name', value: 'good' }, 'suggestion.question', 'must be a valid key name'],
    ];
    for (const [suggestion, path, message] of cases) {
      const res = await stack.post('/feedback-suggestion', { feedback_record_id: id, suggestion });
      expect(res.status, JSON.stringify(suggestion)).to.equal(400);
      expect(res.body.error.code).to.equal('validation_failed');
      const detail = (res.body.error.details as { path: string; message: string }[]).find((d) => d.path === path);
      expect(detail, `${JSON.stringify(suggestion)}: ${res.text}`).to.not.equal(undefined);
      expect(detail!.message).to.include(message);
    }
    const withRecord = await stack.post('/feedback-record', recordOf('ds_sug', 'p3', { suggestions: [{ question: 'verdict', value: 'good' }, { question: 'verdict', value: 'so-so' }] }));
    expect(withRecord.status).to.equal(400);
    expect(withRecord.body.error.details.map((d: { path: string }) => d.path)).to.deep.equal(['suggestions[1].value']);
    // A record that breaks the definition too: every problem at once, the record's and the suggestions'.
    const both = await stack.post('/feedback-record', { ...recordOf('ds_sug', 'p4', { suggestions: [{ question: 'verdict', value: 'so-so' }] }), response: { values: { verdict: 'meh' }, user_id: 'first-annotator' } });
    expect(both.status).to.equal(400);
    expect(both.body.error.details.map((d: { path: string }) => d.path)).to.deep.equal(['response.values.verdict', 'suggestions[0].value']);

    const unknown = await stack.post('/feedback-suggestion', { feedback_record_id: 'rec_not_minted_here', suggestion: { question: 'verdict', value: 'good' } });
    expect(unknown.status).to.equal(404);
    expect(unknown.body.error.code).to.equal('record_not_found');
    const record = await storedRecord(id, () => true, 'the record');
    expect(record).to.not.have.property('suggestions');
  });

  it('Idempotency-Key: a repeat answers the first id and stores one suggestion; a batch item with `suggestion` is a suggestion', async () => {
    const created = await stack.post('/feedback-record', recordOf('ds_sug', 'p4'));
    const id: string = created.body.feedback_record_id;
    const body = { feedback_record_id: id, suggestion: { question: 'verdict', value: 'bad', agent: 'idem' } };
    const a = await stack.post('/feedback-suggestion', body, { 'Idempotency-Key': 'sug-key-1' });
    const b = await stack.post('/feedback-suggestion', body, { 'Idempotency-Key': 'sug-key-1' });
    expect(a.status, a.text).to.equal(200);
    expect(b.body).to.deep.equal(a.body);
    expect(b.headers.get('idempotent-replayed')).to.equal('true');
    const batch = await stack.post('/feedback-batch', {
      items: [
        { feedback_record_id: id, suggestion: { question: 'stars', value: 2, agent: 'batch' } },
        { feedback_record_id: id, suggestion: { question: 'stars', value: 7, agent: 'batch' } },
      ],
    });
    expect(batch.status, batch.text).to.equal(207);
    expect(batch.body.items.map((i: { status: number }) => i.status)).to.deep.equal([200, 400]);
    expect(batch.body.items[0].result).to.have.property('feedback_suggestion_id');
    const record = await storedRecord(id, (s) => s.length === 2, 'the two suggestions');
    expect(record.suggestions.map((s: any) => [s.agent, s.value])).to.deep.equal([['batch', 2], ['idem', 'bad']]);
  });

  describe('GET /datasets/{dataset_id}/agreement with include_agents and records', () => {
    // verdict (nominal): annotators A and B, agent m. Hand-computed from the coincidence matrix:
    // A, B only: o(g,g)=2, o(b,b)=4, o(g,b)=o(b,g)=1, n=8 -> alpha = 1 - (2/8)/(2*3*5/(8*7)) = 8/15.
    // With m: o(g,g)=4, o(b,b)=4, o(g,b)=o(b,g)=2, n=12 -> alpha = 1 - (4/12)/(2*6*6/(12*11)) = 7/18.
    // records=completed on r1 and r3 (A, B only): o(g,g)=2, o(g,b)=o(b,g)=1, n=4 -> alpha = 1 - (2/4)/(2*3*1/(4*3)) = 0.
    const UNITS: [string, string, string][] = [
      ['good', 'good', 'good'],
      ['bad', 'bad', 'good'],
      ['good', 'bad', 'good'],
      ['bad', 'bad', 'bad'],
    ];
    const ids: string[] = [];

    before(async () => {
      for (const [u, [a, b, m]] of UNITS.entries()) {
        const created = await stack.post('/feedback-record', {
          record: { feedback_dataset_id: 'ds_sug_agree', field_to_value: { prompt: `r${u}` } },
          response: { values: { verdict: a }, user_id: 'A' },
          suggestions: [{ question: 'verdict', value: m, agent: 'm' }],
        });
        expect(created.status, created.text).to.equal(200);
        ids.push(created.body.feedback_record_id);
        expect((await stack.post('/feedback-response', { feedback_record_id: created.body.feedback_record_id, response: { status: 'submitted', values: { verdict: b }, user_id: 'B' } })).status).to.equal(200);
      }
      // A suggestion of another agent for another question: never counted for verdict.
      expect((await stack.post('/feedback-suggestion', { feedback_record_id: ids[0], suggestion: { question: 'stars', value: 1, agent: 'm' } })).status).to.equal(200);
      // Waits on the store itself, so that a broken agreement option fails its own test, not this hook.
      await eventually(async () => {
        const [answers, suggested] = await Promise.all([
          stack.db.collection('feedback_responses').countDocuments({ feedback_dataset_id: 'ds_sug_agree', status: 'submitted' }),
          stack.db.collection('feedback_suggestions').countDocuments({ feedback_dataset_id: 'ds_sug_agree', question: 'verdict' }),
        ]);
        return answers === 8 && suggested === 4 ? true : undefined;
      }, 15_000, 'every response and suggestion stored');
    });

    const agreement = async (query: string) => {
      const res = await read(`/datasets/ds_sug_agree/agreement?question=verdict${query}`);
      expect(res.status, res.text).to.equal(200);
      return res.body;
    };

    it('without include_agents the annotators only; with it the agents are observers beside them (hand-computed alphas)', async () => {
      const humans = await agreement('');
      expect(humans).to.include({ units: 4, annotators: 2, pairable_values: 8 });
      expect(humans).to.not.have.property('agents');
      expect(humans.alpha).to.be.closeTo(8 / 15, 1e-12);
      for (const q of ['&include_agents=true', '&include_agents=m', '&include_agents=m,other']) {
        const all = await agreement(q);
        expect(all, q).to.include({ units: 4, annotators: 2, agents: 1, pairable_values: 12 });
        expect(all.alpha, q).to.be.closeTo(7 / 18, 1e-12);
      }
      const none = await agreement('&include_agents=other');
      expect(none).to.include({ agents: 0, pairable_values: 8 });
      expect(none.alpha).to.be.closeTo(8 / 15, 1e-12);
      // One annotator and the agent: A against m. o(g,g)=4, o(b,b)=2, o(g,b)=o(b,g)=1, n=8 -> 1 - (2/8)/(2*5*3/56) = 8/15.
      const pair = await agreement('&annotators=A&include_agents=true');
      expect(pair).to.include({ units: 4, annotators: 1, agents: 1, pairable_values: 8 });
      expect(pair.alpha).to.be.closeTo(8 / 15, 1e-12);
      const b = await agreement('&annotators=B&include_agents=true');
      // B against m: r1 g,g r2 b,g r3 b,g r4 b,b: o(g,g)=2, o(b,b)=2, o(g,b)=o(b,g)=2, n=8, n_g=4, n_b=4 -> 1 - (4/8)/(2*16/56) = 1/8.
      expect(b.alpha).to.be.closeTo(1 / 8, 1e-12);
    });

    it('records=completed measures the records whose stored status is completed only', async () => {
      expect(await agreement('&records=completed')).to.include({ units: 0, pairable_values: 0, alpha: null });
      // The completion rule (issue 25 §1) sets the status; here the test sets it in the store.
      await records(stack.db).updateMany({ _id: { $in: [ids[0]!, ids[2]!] } }, { $set: { status: 'completed' } });
      const completed = await agreement('&records=completed');
      expect(completed).to.include({ units: 2, annotators: 2, pairable_values: 4 });
      expect(completed.alpha).to.equal(0);
      expect((await agreement('&records=all')).units).to.equal(4);
      const withAgent = await agreement('&records=completed&include_agents=true');
      expect(withAgent).to.include({ units: 2, agents: 1, pairable_values: 6 });
    });

    it('the typed client: suggest() and getAgreement() with include_agents and records', async () => {
      const writer = createFeedbackClient({ baseUrl: stack.baseUrl, apiKey: TEST_KEY.secret });
      const reader = createFeedbackClient({ baseUrl: stack.baseUrl, apiKey: READER.secret });
      const accepted = await writer.suggest({ feedback_record_id: ids[3]!, suggestion: { question: 'stars', value: 5, agent: 'client' } });
      expect(accepted.feedback_record_id).to.equal(ids[3]);
      expect(accepted.feedback_suggestion_id).to.match(/^sug_/);
      const all = await reader.getAgreement('ds_sug_agree', { question: 'verdict', include_agents: true });
      expect(all.agents).to.equal(1);
      expect(all.alpha).to.be.closeTo(7 / 18, 1e-12);
      const listed = await reader.getAgreement('ds_sug_agree', { question: 'verdict', include_agents: ['m', 'x'], records: 'all' });
      expect(listed.alpha).to.be.closeTo(7 / 18, 1e-12);
    });

    it('refuses a bad include_agents with 400', async () => {
      for (const q of ['&include_agents=', '&include_agents=a,,b']) {
        const res = await read(`/datasets/ds_sug_agree/agreement?question=verdict${q}`);
        expect(res.status, q).to.equal(400);
        expect(res.body.error.details[0].path).to.equal('query.include_agents');
      }
    });
  });
});
