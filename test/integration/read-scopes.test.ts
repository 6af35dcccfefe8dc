import { expect } from 'chai';
import { createApiKeyAdmin } from '../../shared/api-keys.js';
import { OTHER_KEY, testConfig, TEST_KEY } from '../helpers/env.js';
import { insertSeed, seedDocs } from '../helpers/read-seed.js';
import { eventually, recordBody, startStack, type HttpResult, type Stack } from '../helpers/stack.js';

const READER = { name: 'reader', secret: 'reader-secret-key-0004' } as const;
const ADMIN = { name: 'ops', secret: 'ops-secret-key-0003' } as const;
const API_KEYS = [TEST_KEY, OTHER_KEY, READER, ADMIN].map((k) => `${k.name}:${k.secret}`).join(',');

describe('read endpoints: scopes', () => {
  let stack: Stack;
  let scopedReader: string;
  let scopedWriter: string;
  let recordA: string;
  let recordB: string;
  const get = (path: string, secret: string): Promise<HttpResult> => stack.request(path, { headers: { Authorization: `Bearer ${secret}` } });
  const paths = (dataset: string, record: string) => [`/feedback-record/${record}`, `/datasets/${dataset}/records`, `/datasets/${dataset}/export`, `/datasets/${dataset}/agreement?question=helpful`];

  before(async () => {
    stack = await startStack(testConfig({ API_KEYS, READ_API_KEY_NAMES: READER.name, ADMIN_API_KEY_NAMES: ADMIN.name, API_KEYS_REFRESH_MS: '100' }));
    const admin = createApiKeyAdmin({ db: stack.db, reservedNames: stack.config.apiKeys.map((k) => k.name) });
    scopedReader = (await admin.create({ name: 'scoped-reader', datasets: ['ds_a'], read: true })).secret;
    scopedWriter = (await admin.create({ name: 'scoped-writer', datasets: ['ds_a'] })).secret;
    await insertSeed(stack.db, seedDocs({ datasetId: 'ds_a', count: 3 }));
    await insertSeed(stack.db, seedDocs({ datasetId: 'ds_b', count: 3 }));
    recordA = (await stack.post('/feedback-record', recordBody({ record: { feedback_dataset_id: 'ds_a' } }))).body.feedback_record_id;
    recordB = (await stack.post('/feedback-record', recordBody({ record: { feedback_dataset_id: 'ds_b' } }))).body.feedback_record_id;
    await eventually(async () => ((await get(`/feedback-record/${recordA}`, scopedReader)).status === 200 ? true : undefined), 15_000, 'stored keys loaded and records stored');
    // Both stored keys are loaded: a refresh between the two creates loads the reader only.
    await eventually(async () => ((await get(`/feedback-record/${recordA}`, scopedWriter)).status === 403 ? true : undefined), 15_000, 'stored write-only key loaded');
    await eventually(async () => ((await get(`/feedback-record/${recordB}`, READER.secret)).status === 200 ? true : undefined), 15_000, 'record B stored');
  });
  after(async () => {
    await stack?.close();
  });

  it('a write-only key (API_KEYS without READ_API_KEY_NAMES, stored without --read) gets 403 forbidden on every read endpoint', async () => {
    for (const secret of [TEST_KEY.secret, scopedWriter]) {
      for (const path of paths('ds_a', recordA)) {
        const res = await get(path, secret);
        expect(res.status, path).to.equal(403);
        expect(res.body.error.code, path).to.equal('forbidden');
        expect(res.body.error.message, path).to.match(/no read scope/);
      }
    }
  });

  it('a read key limited to ds_a reads ds_a (200) and gets 403 forbidden on ds_b, stored or pending', async () => {
    for (const path of paths('ds_a', recordA)) expect((await get(path, scopedReader)).status, path).to.equal(200);
    for (const path of paths('ds_b', recordB)) {
      const res = await get(path, scopedReader);
      expect(res.status, path).to.equal(403);
      expect(res.body.error.code, path).to.equal('forbidden');
    }
    // Pending in the queue: the id's dataset fingerprint decides, before any read.
    await stack.stopWorker();
    try {
      const pendingB = (await stack.post('/feedback-record', recordBody({ record: { feedback_dataset_id: 'ds_b' } }))).body.feedback_record_id;
      expect((await get(`/feedback-record/${pendingB}`, scopedReader)).status).to.equal(403);
      const pendingA = (await stack.post('/feedback-record', recordBody({ record: { feedback_dataset_id: 'ds_a' } }))).body.feedback_record_id;
      expect((await get(`/feedback-record/${pendingA}`, scopedReader)).body.error.code).to.equal('record_pending');
    } finally {
      await stack.startWorker();
    }
  });

  it('a read key of API_KEYS (READ_API_KEY_NAMES) and an admin key read every dataset (200)', async () => {
    for (const secret of [READER.secret, ADMIN.secret]) {
      for (const path of [...paths('ds_a', recordA), ...paths('ds_b', recordB)]) expect((await get(path, secret)).status, path).to.equal(200);
    }
  });

  it('without a key: 401 unauthorized; an unknown key: 401 invalid_api_key', async () => {
    const none = await stack.request('/datasets/ds_a/records', {});
    expect(none.status).to.equal(401);
    expect(none.body.error.code).to.equal('unauthorized');
    const bad = await get('/datasets/ds_a/records', 'not-a-key-at-all');
    expect(bad.status).to.equal(401);
    expect(bad.body.error.code).to.equal('invalid_api_key');
  });
});
