import { expect } from 'chai';
import { measureAgreement } from '../../api/agreement-measure.js';
import { createRecordReader } from '../../api/reads.js';
import { createFeedbackClient, FeedbackApiError } from '../../client/index.js';
import { agreementScale } from '../../api/agreement-scale.js';
import type { ResponseUnit } from '../../api/response-units.js';
import { AGREEMENT_LEVELS } from '../../shared/agreement.js';
import type { DatasetDefinition } from '../../shared/dataset-definition.js';
import { OTHER_KEY, testConfig, TEST_KEY } from '../helpers/env.js';
import { KRIPPENDORFF_2011_C, KRIPPENDORFF_2011_C_ALPHA } from '../helpers/krippendorff-2011.js';
import { insertSeed, seedDocs, seedReliabilityData, type SeededRecord } from '../helpers/read-seed.js';
import { records, responses, startStack, type HttpResult, type Stack } from '../helpers/stack.js';

const READER = { name: 'reader', secret: 'reader-secret-key-0004' } as const;
const ADMIN = { name: 'ops', secret: 'ops-secret-key-0003' } as const;
const API_KEYS = [TEST_KEY, OTHER_KEY, READER, ADMIN].map((k) => `${k.name}:${k.secret}`).join(',');
const OBSERVERS = ['A', 'B', 'C', 'D'];

const DEFINITION = {
  fields: [{ name: 'prompt', type: 'text' }],
  questions: [
    { name: 'quality', type: 'rating', values: [1, 2, 3, 4, 5] },
    { name: 'note', type: 'text', required: false },
  ],
};

/** The units the store should yield for seeded records: submitted responses only, by record. */
function unitsOf(seeded: readonly SeededRecord[], question: string, annotators?: readonly string[]): ResponseUnit[] {
  return seeded.map((s) => ({
    recordId: s.record._id,
    values: s.responses.filter((r) => r.status === 'submitted' && (annotators === undefined || annotators.includes(r.user_id))).map((r) => ({ userId: r.user_id, value: r.values[question] })),
  }));
}

async function* stream(units: readonly ResponseUnit[]): AsyncGenerator<ResponseUnit> {
  yield* units;
}

describe('GET /datasets/{dataset_id}/agreement', () => {
  let stack: Stack;
  let rated: SeededRecord[];
  const get = (path: string, secret: string = READER.secret): Promise<HttpResult> => stack.request(path, { headers: { Authorization: `Bearer ${secret}` } });

  before(async () => {
    stack = await startStack(testConfig({ API_KEYS, READ_API_KEY_NAMES: READER.name, ADMIN_API_KEY_NAMES: ADMIN.name }));
    const put = await stack.request('/datasets/ds_rated', { method: 'PUT', headers: { Authorization: `Bearer ${ADMIN.secret}`, 'Content-Type': 'application/json' }, body: JSON.stringify(DEFINITION) });
    expect(put.status, put.text).to.equal(201);
    // Krippendorff's section C on a defined rating question, plus draft and discarded responses by
    // two more annotators that disagree with everyone: they must not count.
    const submitted = seedReliabilityData({ datasetId: 'ds_rated', question: 'quality', observers: OBSERVERS, matrix: KRIPPENDORFF_2011_C });
    const drafts = seedReliabilityData({ datasetId: 'ds_rated', question: 'quality', observers: ['E', 'F'], matrix: [Array(12).fill(5), Array(12).fill(1)], status: 'draft' });
    rated = submitted.map((s, u) => ({ record: s.record, responses: [...s.responses, ...drafts[u]!.responses.map((r, i) => (i === 1 ? { ...r, status: 'discarded' } : r))] }));
    // Observer by observer, so that a record's responses are not stored next to each other: only
    // the cursor's sort brings them together.
    await records(stack.db).insertMany(rated.map((s) => s.record) as never[]);
    await responses(stack.db).insertMany(rated.flatMap((s) => s.responses).sort((a, b) => a.user_id.localeCompare(b.user_id)) as never[]);
    // The same matrix in a dataset without a definition, and a neighbour whose responses must not leak in.
    await insertSeed(stack.db, seedReliabilityData({ datasetId: 'ds_free', question: 'quality', observers: OBSERVERS, matrix: KRIPPENDORFF_2011_C }));
    await insertSeed(stack.db, seedReliabilityData({ datasetId: 'ds_rated_other', question: 'quality', observers: OBSERVERS, matrix: [[1, 1], [5, 5]] }));
  });
  after(async () => {
    await stack?.close();
  });

  it("answers Krippendorff's published alpha at every level, equal to the module's answer for the same units", async () => {
    const definition = { ...DEFINITION, id: 'ds_rated', created_at: '', updated_at: '' } as DatasetDefinition;
    for (const level of [undefined, ...AGREEMENT_LEVELS]) {
      const res = await get(`/datasets/ds_rated/agreement?question=quality${level === undefined ? '' : `&level=${level}`}`);
      expect(res.status, res.text).to.equal(200);
      expect(res.headers.get('cache-control')).to.equal('no-store');
      const expected = await measureAgreement('quality', agreementScale(definition, 'quality', level), stream(unitsOf(rated, 'quality')));
      expect(res.body, String(level)).to.deep.equal(expected);
      expect(res.body).to.include({ question: 'quality', level: level ?? 'ordinal', units: 11, annotators: 4, pairable_values: 40, excluded_values: 0 });
      expect(Number(res.body.alpha.toFixed(3))).to.equal(KRIPPENDORFF_2011_C_ALPHA[level ?? 'ordinal']);
    }
  });

  it('without a definition the values decide the default level (numbers: interval)', async () => {
    const res = await get('/datasets/ds_free/agreement?question=quality');
    expect(res.status, res.text).to.equal(200);
    expect(res.body).to.include({ level: 'interval', units: 11, pairable_values: 40 });
    expect(res.body.alpha.toFixed(3)).to.equal('0.849');
  });

  it('without a definition, text values are nominal also when no record has two answers (nothing pairable)', async () => {
    // One annotator per record: no unit is pairable, the values alone tell the type.
    await insertSeed(stack.db, seedReliabilityData({ datasetId: 'ds_free_text', question: 'tone', observers: ['A'], matrix: [['calm', 'angry', 'calm']] }));
    const res = await get('/datasets/ds_free_text/agreement?question=tone');
    expect(res.status, res.text).to.equal(200);
    expect(res.body).to.include({ level: 'nominal', alpha: null, units: 0, pairable_values: 0 });
  });

  it('annotators=A,C measures only theirs', async () => {
    const res = await get('/datasets/ds_rated/agreement?question=quality&annotators=A,C&level=nominal');
    expect(res.status, res.text).to.equal(200);
    const definition = { ...DEFINITION, id: 'ds_rated', created_at: '', updated_at: '' } as DatasetDefinition;
    const expected = await measureAgreement('quality', agreementScale(definition, 'quality', 'nominal'), stream(unitsOf(rated, 'quality', ['A', 'C'])));
    expect(res.body).to.deep.equal(expected);
    expect(res.body).to.include({ annotators: 2, units: 8 });
  });

  it('without a definition, filters that leave no value answer units 0, not "no such question"', async () => {
    // ds_free's records are seeded `submitted` (no rule): none is completed, and nobody is no annotator.
    for (const filters of ['records=completed', 'annotators=nobody', 'annotators=nobody&records=completed']) {
      const res = await get(`/datasets/ds_free/agreement?question=quality&${filters}`);
      expect(res.status, `${filters}: ${res.text}`).to.equal(200);
      expect(res.body, filters).to.include({ question: 'quality', alpha: null, units: 0, pairable_values: 0 });
    }
    // A question nobody answers is still 404 with the same filters.
    const missing = await get('/datasets/ds_free/agreement?question=colour&records=completed');
    expect(missing.status, missing.text).to.equal(404);
    expect(missing.body.error.code).to.equal('question_not_found');
  });

  it("a number question's bounds decide which stored values fit: those outside them now are excluded", async () => {
    const units = unitsOf(rated, 'quality');
    const number = (max: number) => ({ ...DEFINITION, id: 'ds_n', created_at: '', updated_at: '', questions: [{ name: 'quality', type: 'number', min: 1, max, required: true }] }) as DatasetDefinition;
    const all = await measureAgreement('quality', agreementScale(number(5), 'quality', undefined), stream(units));
    const cut = await measureAgreement('quality', agreementScale(number(4), 'quality', undefined), stream(units));
    const fives = units.flatMap((u) => u.values).filter((x) => x.value === 5).length;
    expect(fives).to.be.greaterThan(0);
    expect(all).to.include({ excluded_values: 0, pairable_values: 40 });
    expect(cut.excluded_values).to.equal(fives);
    expect(cut.alpha).to.not.equal(all.alpha);
  });

  it('refuses what it cannot measure, with the error shape', async () => {
    const cases: [string, number, string, string?][] = [
      ['question=quality&colour=red', 400, 'validation_failed', 'query.colour'],
      ['', 400, 'validation_failed', 'query.question'],
      ['question=a.b', 400, 'validation_failed', 'query.question'],
      ['question=quality&level=fuzzy', 400, 'validation_failed', 'query.level'],
      ['question=quality&records=done', 400, 'validation_failed', 'query.records'],
      ['question=quality&annotators=A,,B', 400, 'validation_failed', 'query.annotators'],
      ['question=note', 400, 'validation_failed', 'query.question'],
      ['question=colour', 404, 'question_not_found'],
      ['question=quality&question=note', 400, 'validation_failed', 'query.question'],
      ['question=quality&level[]=x', 400, 'validation_failed', 'query["level[]"]'],
    ];
    for (const [query, status, code, path] of cases) {
      const res = await get(`/datasets/ds_rated/agreement?${query}`);
      expect(res.status, `${query}: ${res.text}`).to.equal(status);
      expect(res.body.error.code, query).to.equal(code);
      if (path !== undefined) expect(res.body.error.details.map((d: { path: string }) => d.path), query).to.include(path);
    }
    const repeated = await get('/datasets/ds_rated/agreement?question=quality&level=nominal&level=ordinal');
    expect(repeated.body.error.details).to.deep.equal([{ path: 'query.level', message: 'must be given once' }]);
    expect((await get('/datasets/ds_free/agreement?question=colour')).body.error.code).to.equal('question_not_found');
    expect((await get('/datasets/ds_rated/agreement?question=quality&records=all')).status).to.equal(200);
  });

  it('the typed client: getAgreement answers as the endpoint does, a refusal rejects with its code', async () => {
    const client = createFeedbackClient({ baseUrl: stack.baseUrl, apiKey: READER.secret, retry: { maxAttempts: 1 } });
    const answer = await client.getAgreement('ds_rated', { question: 'quality', level: 'nominal', annotators: ['A', 'C'] });
    expect(answer).to.deep.equal((await get('/datasets/ds_rated/agreement?question=quality&level=nominal&annotators=A,C')).body);
    const err = await client.getAgreement('ds_rated', { question: 'colour' }).then(() => undefined, (e: unknown) => e);
    expect(err).to.be.instanceOf(FeedbackApiError);
    expect((err as FeedbackApiError).code).to.equal('question_not_found');
  });

  it('the store yields each record once, its responses together, in record order, across many driver batches', async () => {
    // 2,500 records (more than two driver batches of responses), 0-3 responses each, inserted in shuffled id order.
    const many = seedDocs({ datasetId: 'ds_many', count: 2500, responseTimesMs: (i, created) => Array.from({ length: i % 4 }, () => created) });
    await insertSeed(stack.db, many);
    const reader = createRecordReader({ db: stack.db });
    const seen: string[] = [];
    let values = 0;
    for await (const unit of reader.submittedUnits({ datasetId: 'ds_many', question: 'helpful' })) {
      expect(unit.values.map((x) => x.userId)).to.have.members(Array.from({ length: unit.values.length }, (_, j) => `annotator-${j}`));
      seen.push(unit.recordId);
      values += unit.values.length;
    }
    const expected = many.filter((s) => s.responses.length > 0).map((s) => s.record._id).sort();
    expect(seen).to.deep.equal(expected);
    expect(values).to.equal(many.reduce((sum, s) => sum + s.responses.length, 0));
  });

  it('needs the read scope, as /records does', async () => {
    const res = await get('/datasets/ds_rated/agreement?question=quality', TEST_KEY.secret);
    expect(res.status, res.text).to.equal(403);
    expect(res.body.error.code).to.equal('forbidden');
  });
});
