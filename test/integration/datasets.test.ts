import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { startApi, type ApiServer } from '../../api/server.js';
import { createDatasetAdmin } from '../../shared/dataset-admin.js';
import { createIdMinter } from '../../shared/ids.js';
import { runDatasetsCommand } from '../../scripts/datasets.js';
import { runCli } from '../helpers/cli.js';
import { OTHER_KEY, testConfig, TEST_KEY } from '../helpers/env.js';
import { eventually, records, silentLogger, startStack, type HttpResult, type Stack } from '../helpers/stack.js';

/*
 * Dataset definitions through HTTP on real Redis and FerretDB. The type matrix is in
 * test/unit/dataset-validators.test.ts; these check the wiring: admin endpoints, the checks
 * before the 200 on both endpoints (a record still queued included), both modes, the CLI, and a
 * definition change reaching a second API process.
 */

const EXAMPLE_FILE = fileURLToPath(new URL('../../docs/datasets/ds_support_bot.json', import.meta.url));
const EXAMPLE = JSON.parse(readFileSync(EXAMPLE_FILE, 'utf8')) as Record<string, unknown> & { id: string };
const ADMIN = { name: 'ops', secret: 'ops-secret-key-0003' } as const;
const API_KEYS = `${TEST_KEY.name}:${TEST_KEY.secret},${OTHER_KEY.name}:${OTHER_KEY.secret},${ADMIN.name}:${ADMIN.secret}`;
const env = (extra: Record<string, string> = {}) => ({ API_KEYS, ADMIN_API_KEY_NAMES: ADMIN.name, DATASETS_REFRESH_MS: '100', ...extra });

const VALID_RECORD = {
  record: {
    feedback_dataset_id: 'ds_support_bot',
    field_to_value: {
      prompt: 'How do I reset my password?', answer: 'Go to Settings', alternative: 'Ask support', model: 'gpt-x',
      conversation: [{ role: 'user', content: 'hi' }], retrieved: { docs: ['kb-1'] }, latency_ms: 812, cached: false,
    },
  },
  response: { values: { rating: 4, helpful: 'yes', topics: ['account'], preference: ['answer', 'alternative'], correction: 'ok', confidence: 0.9 } },
};

async function call(baseUrl: string, method: string, path: string, secret: string, body?: unknown): Promise<HttpResult> {
  const res = await fetch(baseUrl + path, {
    method,
    headers: { Authorization: `Bearer ${secret}`, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, body: text === '' ? undefined : JSON.parse(text) };
}

function detailsOf(res: HttpResult): { path: string; message: string }[] {
  expect(res.status, res.text).to.equal(400);
  expect(res.body.error.code).to.equal('validation_failed');
  return res.body.error.details as { path: string; message: string }[];
}

describe('datasets (HTTP, open mode)', () => {
  let stack: Stack;
  const admin = (method: string, path: string, body?: unknown) => call(stack.baseUrl, method, path, ADMIN.secret, body);

  before(async () => {
    // No worker: every record stays queued, so responses are checked without the record in MongoDB.
    stack = await startStack(testConfig(env()), { worker: false });
    const put = await admin('PUT', '/datasets/ds_support_bot', EXAMPLE);
    expect(put.status, put.text).to.equal(201);
  });
  after(async () => {
    await stack?.close();
  });

  it('PUT is idempotent, GET returns the definition with its defaults, and only admin keys manage definitions', async () => {
    const first = await admin('GET', '/datasets/ds_support_bot');
    expect(first.status).to.equal(200);
    expect(first.body.fields).to.have.length(8);
    expect(first.body.fields[0]).to.deep.equal({ name: 'prompt', type: 'text', required: true });
    const again = await admin('PUT', '/datasets/ds_support_bot', EXAMPLE);
    expect(again.status).to.equal(200);
    expect(again.body.updated_at, 'the same definition changes nothing').to.equal(first.body.updated_at);
    expect((await call(stack.baseUrl, 'PUT', '/datasets/ds_x', TEST_KEY.secret, EXAMPLE)).body.error.code).to.equal('forbidden');
    expect((await call(stack.baseUrl, 'GET', '/datasets', TEST_KEY.secret)).status).to.equal(403);
    const missing = await admin('GET', '/datasets/ds_nothing');
    expect([missing.status, missing.body.error.code]).to.deep.equal([404, 'dataset_not_found']);
  });

  it('a bad definition is 400 with every problem, and the id of the body must be the path\'s', async () => {
    const bad = await admin('PUT', '/datasets/ds_bad', { fields: [{ name: 'a', type: 'txt' }], questions: [{ name: 'r', type: 'rating', values: [] }] });
    expect(detailsOf(bad).map((d) => d.path)).to.deep.equal(['fields[0].type', 'questions[0].values']);
    expect(detailsOf(await admin('PUT', '/datasets/ds_other', EXAMPLE))).to.deep.equal([{ path: 'id', message: 'must be the dataset id of the path ("ds_other") or be left out' }]);
  });

  it('GET /datasets pages by id', async () => {
    for (const id of ['ds_p1', 'ds_p2', 'ds_p3']) expect((await admin('PUT', `/datasets/${id}`, { ...EXAMPLE, id: undefined })).status).to.equal(201);
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page = await admin('GET', `/datasets?limit=2${cursor === null ? '' : `&cursor=${cursor}`}`);
      expect(page.status, page.text).to.equal(200);
      seen.push(...(page.body.items as { id: string }[]).map((d) => d.id));
      cursor = page.body.next_cursor as string | null;
      pages++;
    } while (cursor !== null && pages < 10);
    expect(seen).to.include.members(['ds_p1', 'ds_p2', 'ds_p3', 'ds_support_bot']);
    expect(seen).to.deep.equal([...seen].sort());
    expect(new Set(seen).size).to.equal(seen.length);
    expect(detailsOf(await admin('GET', '/datasets?limit=0'))[0]!.path).to.equal('query.limit');
  });

  it('ids and texts a store would refuse are 400 before it is asked; GET /datasets refuses a cursor it did not return', async () => {
    const minimal = { fields: [{ name: 'text', type: 'text' }], questions: [{ name: 'color', type: 'label', options: ['red', 'blue'] }] };
    for (const path of ['/datasets/a%00b', '/datasets/a%0Ab', '/datasets/%24bad', '/datasets/__proto__']) {
      const put = await admin('PUT', path, minimal);
      expect(put.status, `PUT ${path}: ${put.text}`).to.equal(400);
      const get = await admin('GET', path);
      expect(get.status, `GET ${path}: ${get.text}`).to.equal(400);
      expect(get.body.error.code).to.equal('validation_failed');
    }
    const nulTitle = await admin('PUT', '/datasets/ds_nul', { ...minimal, title: 'a\u0000b' });
    expect(detailsOf(nulTitle).map((d) => d.path)).to.deep.equal(['title']);
    const nulOption = await admin('PUT', '/datasets/ds_nul', { ...minimal, questions: [{ name: 'color', type: 'label', options: ['red', 'bl\u0000ue'] }] });
    expect(detailsOf(nulOption).map((d) => d.path)).to.deep.equal(['questions[0].options[1]']);
    const nulRecord = await call(stack.baseUrl, 'POST', '/feedback-record', TEST_KEY.secret, { ...VALID_RECORD, record: { ...VALID_RECORD.record, feedback_dataset_id: 'ds\u0000x' } });
    expect(detailsOf(nulRecord).map((d) => d.path)).to.deep.equal(['record.feedback_dataset_id']);
    for (const bad of ['garbage', 'ds_support_bot', Buffer.from(JSON.stringify(['x', 'ds_a'])).toString('base64url')]) {
      expect(detailsOf(await admin('GET', `/datasets?cursor=${bad}`)).map((d) => d.path), bad).to.deep.equal(['query.cursor']);
    }
  });

  it('a PUT applies at once in the process that served it, also while a periodic reload is in flight', async () => {
    // DATASETS_REFRESH_MS is 100 here: reloads are often in flight when a PUT asks for one.
    const defined = (options: string[]) => ({ fields: [{ name: 'text', type: 'text' }], questions: [{ name: 'color', type: 'label', options }] });
    const write = (color: string) => call(stack.baseUrl, 'POST', '/feedback-record', TEST_KEY.secret, { record: { feedback_dataset_id: 'ds_race', field_to_value: { text: 't' } }, response: { values: { color } } });
    const wrong: string[] = [];
    for (let i = 0; i < 60; i++) {
      const narrow = await admin('PUT', '/datasets/ds_race', defined(['red']));
      expect(narrow.status, narrow.text).to.be.oneOf([200, 201]);
      const refused = await write('blue');
      if (refused.status !== 400) wrong.push(`round ${i}: blue after narrowing got ${refused.status}`);
      const widen = await admin('PUT', '/datasets/ds_race', defined(['red', 'blue']));
      expect(widen.status, widen.text).to.equal(200);
      const accepted = await write('blue');
      if (accepted.status !== 200) wrong.push(`round ${i}: blue after widening got ${accepted.status}`);
    }
    expect(wrong).to.deep.equal([]);
  });

  it('a valid record of every field and question type is accepted', async () => {
    const res = await stack.post('/feedback-record', VALID_RECORD);
    expect(res.status, res.text).to.equal(200);
  });

  it('a record with bad, missing and unknown fields and questions is 400 listing each problem with its path', async () => {
    const res = await stack.post('/feedback-record', {
      record: { feedback_dataset_id: 'ds_support_bot', field_to_value: { prompt: 'p', answer: 42, anwser: 'typo', conversation: [{ role: 'user' }] } },
      response: { values: { rating: 11, helpful: 'maybe', topics: [], preference: ['answer'], ratng: 3 } },
    });
    expect(res.body.error.message).to.be.a('string');
    expect(detailsOf(res)).to.have.deep.members([
      { path: 'record.field_to_value.answer', message: 'must be a string' },
      { path: 'record.field_to_value.model', message: 'is required' },
      { path: 'record.field_to_value.anwser', message: 'is not a field of this dataset' },
      { path: 'record.field_to_value.conversation[0].content', message: 'is required' },
      { path: 'response.values.rating', message: 'must be one of 1, 2, 3, 4, 5' },
      { path: 'response.values.helpful', message: 'must be one of yes, no' },
      { path: 'response.values.topics', message: 'must choose at least one option' },
      { path: 'response.values.preference', message: 'must rank every option when submitted: answer, alternative' },
      { path: 'response.values.ratng', message: 'is not a question of this dataset' },
    ]);
  });

  it('a response to a record still in the queue is checked against the record\'s dataset', async () => {
    const created = await stack.post('/feedback-record', VALID_RECORD);
    expect(created.status).to.equal(200);
    const recordId = created.body.feedback_record_id as string;
    expect(await records(stack.db).countDocuments({ _id: recordId }), 'no worker: the record is only queued').to.equal(0);
    const respond = (status: string, values: Record<string, unknown>) => stack.post('/feedback-response', { feedback_record_id: recordId, response: { status, values, user_id: 'annotator-1' } });

    expect((await respond('draft', { preference: ['alternative'] })).status, 'a partial draft').to.equal(200);
    expect((await respond('discarded', {})).status, 'an empty discard').to.equal(200);
    expect(detailsOf(await respond('submitted', { rating: 5 }))).to.deep.equal([{ path: 'response.values.helpful', message: 'is required' }]);
    expect(detailsOf(await respond('submitted', { rating: 5, helpful: 'no', preference: ['answer', 'answer'] }))).to.deep.equal([
      { path: 'response.values.preference', message: 'must not rank an option twice' },
    ]);
    expect(detailsOf(await respond('draft', { confidence: 2, colour: 'red' }))).to.have.deep.members([
      { path: 'response.values.confidence', message: 'must be at most 1' },
      { path: 'response.values.colour', message: 'is not a question of this dataset' },
    ]);
    expect((await respond('submitted', { rating: 5, helpful: 'no', preference: ['alternative', 'answer'] })).status).to.equal(200);
  });

  it('open mode: a dataset without a definition takes any fields and questions', async () => {
    const res = await stack.post('/feedback-record', { record: { feedback_dataset_id: 'ds_free', field_to_value: { anything: [1] } }, response: { values: { whatever: 'x' } } });
    expect(res.status, res.text).to.equal(200);
    const reply = await stack.post('/feedback-response', { feedback_record_id: res.body.feedback_record_id, response: { status: 'submitted', values: { other: 11 } } });
    expect(reply.status, reply.text).to.equal(200);
  });

  it('GET /datasets/{id}/schema gives JSON Schemas of both bodies to any key that may write to the dataset', async () => {
    const res = await call(stack.baseUrl, 'GET', '/datasets/ds_support_bot/schema', TEST_KEY.secret);
    expect(res.status, res.text).to.equal(200);
    expect(res.body.dataset_id).to.equal('ds_support_bot');
    expect(res.body.record_body.properties.record.properties.field_to_value.required).to.deep.equal(['prompt', 'answer', 'model']);
    expect(res.body.response_body.required).to.deep.equal(['feedback_record_id', 'response']);
    expect((await call(stack.baseUrl, 'GET', '/datasets/ds_free/schema', TEST_KEY.secret)).body.error.code).to.equal('dataset_not_found');
  });

  it('npm run datasets: apply, list, show against MongoDB', async () => {
    const datasetAdmin = createDatasetAdmin({ db: stack.db });
    const lines: string[] = [];
    const errors: string[] = [];
    const io = { out: (l: string) => lines.push(l), err: (l: string) => errors.push(l) };
    expect(await runDatasetsCommand(['apply', EXAMPLE_FILE], datasetAdmin, io), errors.join('\n')).to.equal(0);
    expect(lines[0]).to.match(/^applied dataset "ds_support_bot": 8 fields, 6 questions/);
    expect(await runDatasetsCommand(['list'], datasetAdmin, io)).to.equal(0);
    expect(lines.some((l) => l.startsWith('ds_support_bot\t8\t6\t'))).to.equal(true);
    lines.length = 0;
    expect(await runDatasetsCommand(['show', 'ds_support_bot'], datasetAdmin, io)).to.equal(0);
    expect(JSON.parse(lines.join('\n')).questions).to.have.length(6);
    expect(await runDatasetsCommand(['show', 'ds_nothing'], datasetAdmin, io)).to.equal(1);
    expect(await runDatasetsCommand(['apply'], datasetAdmin, io)).to.equal(2);
  });

  it('npm run datasets as a process: show prints the stored definition, a missing one exits 1', async () => {
    const shown = await runCli('scripts/datasets-main.ts', ['show', 'ds_support_bot'], stack.config, API_KEYS);
    expect(shown.code, shown.stderr).to.equal(0);
    expect(JSON.parse(shown.stdout).id).to.equal('ds_support_bot');
    const missing = await runCli('scripts/datasets-main.ts', ['show', 'ds_nothing'], stack.config, API_KEYS);
    expect([missing.code, missing.stderr.trim()]).to.deep.equal([1, 'error: the dataset "ds_nothing" has no definition']);
  });
});

describe('datasets (HTTP, strict mode and a second API process)', () => {
  let stack: Stack;
  let second: ApiServer | undefined;
  before(async () => {
    stack = await startStack(testConfig(env({ DATASETS: 'strict' })), { worker: false });
    const put = await call(stack.baseUrl, 'PUT', '/datasets/ds_support_bot', ADMIN.secret, EXAMPLE);
    expect(put.status, put.text).to.equal(201);
  });
  after(async () => {
    await second?.close();
    await stack?.close();
  });

  it('strict mode: a write to a dataset without a definition is 404 dataset_not_found, on both endpoints', async () => {
    const res = await stack.post('/feedback-record', { record: { feedback_dataset_id: 'ds_free', field_to_value: { a: 1 } }, response: { values: { b: 1 } } });
    expect([res.status, res.body.error.code]).to.deep.equal([404, 'dataset_not_found']);
    const orphan = createIdMinter(stack.config.idSigningSecrets).newRecordId('ds_free');
    const reply = await stack.post('/feedback-response', { feedback_record_id: orphan, response: { status: 'submitted', values: { b: 1 } } });
    expect([reply.status, reply.body.error.code]).to.deep.equal([404, 'dataset_not_found']);
    expect((await stack.post('/feedback-record', VALID_RECORD)).status, 'a defined dataset').to.equal(200);
  });

  it('strict mode: a batch item to a dataset without a definition gets its own 404 dataset_not_found; the others are accepted', async () => {
    const batch = await stack.post('/feedback-batch', { items: [VALID_RECORD, { record: { feedback_dataset_id: 'ds_free', field_to_value: { a: 1 } }, response: { values: { b: 1 } } }] });
    expect(batch.status, batch.text).to.equal(207);
    expect([batch.body.accepted, batch.body.rejected]).to.deep.equal([1, 1]);
    expect(batch.body.items[0].status).to.equal(200);
    expect(batch.body.items[1]).to.deep.include({ index: 1, status: 404 });
    expect(batch.body.items[1].error.code).to.equal('dataset_not_found');
  });

  it('a changed definition reaches a second API process on the same MongoDB within DATASETS_REFRESH_MS', async () => {
    second = await startApi(stack.config, silentLogger);
    const secondUrl = `http://127.0.0.1:${second.port}`;
    const rated5 = () => call(secondUrl, 'POST', '/feedback-record', TEST_KEY.secret, VALID_RECORD);
    expect((await rated5()).status).to.equal(200);
    const narrowed = { ...EXAMPLE, questions: (EXAMPLE['questions'] as { name: string }[]).map((q) => (q.name === 'rating' ? { ...q, values: [1, 2, 3] } : q)) };
    expect((await call(stack.baseUrl, 'PUT', '/datasets/ds_support_bot', ADMIN.secret, narrowed)).status).to.equal(200);
    const refused = await eventually(async () => {
      const res = await rated5();
      return res.status === 200 ? undefined : res;
    }, 5_000, 'the second API process to apply the new definition');
    expect(detailsOf(refused)).to.deep.equal([{ path: 'response.values.rating', message: 'must be one of 1, 2, 3' }]);
  });
});
