import { expect } from 'chai';
import { startApi } from '../../api/server.js';
import { createIdMinter } from '../../shared/ids.js';
import { OTHER_KEY, testConfig, TEST_KEY } from '../helpers/env.js';
import { startDelayProxy } from '../helpers/delay-proxy.js';
import { sharedServices } from '../helpers/root-hooks.js';
import { eventually, recordBody, silentLogger, startStack, type HttpResult, type Stack } from '../helpers/stack.js';

const READER = { name: 'reader', secret: 'reader-secret-key-0004' } as const;
const API_KEYS = `${TEST_KEY.name}:${TEST_KEY.secret},${OTHER_KEY.name}:${OTHER_KEY.secret},${READER.name}:${READER.secret}`;

describe('GET /feedback-record/{id}', () => {
  let stack: Stack;
  const get = (id: string): Promise<HttpResult> => stack.request(`/feedback-record/${encodeURIComponent(id)}`, { headers: { Authorization: `Bearer ${READER.secret}` } });

  before(async () => {
    stack = await startStack(testConfig({ API_KEYS, READ_API_KEY_NAMES: READER.name }));
  });
  after(async () => {
    await stack?.close();
  });

  it('answers the stored record with all its responses, oldest first, without internal fields', async () => {
    const body = recordBody({ record: { feedback_dataset_id: 'ds_get', external_id: 'conv-1:turn-2', metadata: { model: 'gpt-x' } }, response: { values: { helpful: 1 }, user_id: 'end-user-1' } });
    const created = await stack.post('/feedback-record', body);
    expect(created.status, created.text).to.equal(200);
    const id: string = created.body.feedback_record_id;
    const second = await stack.post('/feedback-response', { feedback_record_id: id, response: { status: 'draft', values: { helpful: 3 }, user_id: 'annotator-4' } });
    expect(second.status, second.text).to.equal(200);

    const res = await eventually(async () => {
      const r = await get(id);
      return r.status === 200 && r.body.responses.length === 2 ? r : undefined;
    }, 15_000, 'the record and both responses to be stored');
    expect(res.headers.get('content-type')).to.match(/^application\/json/);
    const record = res.body;
    expect(record).to.include({ feedback_record_id: id, feedback_dataset_id: 'ds_get', external_id: 'conv-1:turn-2', status: 'submitted' });
    expect(record.field_to_value).to.deep.equal(body.record.field_to_value);
    expect(record.metadata).to.deep.equal({ model: 'gpt-x' });
    expect(new Date(record.created_at).toISOString()).to.equal(record.created_at);
    expect(record.responses.map((r: { user_id: string }) => r.user_id)).to.deep.equal(['end-user-1', 'annotator-4']);
    expect(record.responses[0]).to.include({ feedback_response_id: created.body.feedback_response_id, status: 'submitted' });
    expect(record.responses[0].values).to.deep.equal({ helpful: 1 });
    expect(record.responses[1]).to.include({ feedback_response_id: second.body.feedback_response_id, status: 'draft' });
    expect(record.responses[1].values).to.deep.equal({ helpful: 3 });
    for (const internal of ['api_key', 'request_id', 'seq', '_id']) {
      expect(record, internal).to.not.have.property(internal);
      expect(record.responses[0], internal).to.not.have.property(internal);
    }
  });

  it('tells a record accepted but not stored yet (404 record_pending, Retry-After) from one that never existed (404 record_not_found)', async () => {
    await stack.stopWorker();
    let id: string;
    try {
      const created = await stack.post('/feedback-record', recordBody({ record: { feedback_dataset_id: 'ds_get' } }));
      expect(created.status).to.equal(200);
      id = created.body.feedback_record_id;
      const pending = await get(id);
      expect(pending.status).to.equal(404);
      expect(pending.body.error.code).to.equal('record_pending');
      expect(pending.headers.get('retry-after')).to.equal('1');
    } finally {
      await stack.startWorker();
    }
    const stored = await eventually(async () => {
      const r = await get(id);
      return r.status === 200 ? r : undefined;
    }, 15_000, 'the queued record to be stored');
    expect(stored.body.feedback_record_id).to.equal(id);

    const unknown = await get('rec_nope');
    expect(unknown.status).to.equal(404);
    expect(unknown.body.error.code).to.equal('record_not_found');
  });

  it('a forged id (any character changed, tag or body) is record_not_found, never record_pending', async () => {
    const created = await stack.post('/feedback-record', recordBody({ record: { feedback_dataset_id: 'ds_get' } }));
    const id: string = created.body.feedback_record_id;
    const positions = [4, 10, 20, id.length - 12, id.length - 1];
    for (const at of positions) {
      const forged = id.slice(0, at) + (id[at] === 'A' ? 'B' : 'A') + id.slice(at + 1);
      const res = await get(forged);
      expect(res.status, `position ${at}`).to.equal(404);
      expect(res.body.error.code, `position ${at}`).to.equal('record_not_found');
    }
  });
});

describe('read endpoints: MongoDB unreachable', () => {
  it('answer 503 store_unavailable with Retry-After, not 500 (the export before its first line)', async () => {
    // Nothing listens on port 9 of 127.0.0.1 (discard); the driver gives up after MONGODB_TIMEOUT_MS.
    const config = testConfig({ API_KEYS, READ_API_KEY_NAMES: READER.name, MONGODB_URI: 'mongodb://127.0.0.1:9/nowhere', MONGODB_TIMEOUT_MS: '300' });
    const api = await startApi(config, silentLogger);
    try {
      const minted = createIdMinter(config.idSigningSecrets).newRecordId('ds_a');
      for (const path of [`/feedback-record/${minted}`, '/datasets/ds_a/records', '/datasets/ds_a/export', '/datasets/ds_a/agreement?question=helpful']) {
        const res = await fetch(`http://127.0.0.1:${api.port}${path}`, { headers: { Authorization: `Bearer ${READER.secret}` } });
        expect(res.status, path).to.equal(503);
        expect(res.headers.get('retry-after'), path).to.equal('1');
        expect(((await res.json()) as { error: { code: string } }).error.code, path).to.equal('store_unavailable');
      }
    } finally {
      await api.close();
    }
  });

  it('answer 503 store_unavailable within about MONGODB_TIMEOUT_MS when MongoDB stops answering mid-connection (not after the sockets time out)', async () => {
    // A proxy that forwards until `held`, then holds every byte: a server that hangs, sockets open.
    let held = false;
    const mongoPort = Number(new URL(sharedServices().mongoUrl).port);
    const proxy = await startDelayProxy(mongoPort, 120_000, () => (held ? 1 : 0));
    const config = testConfig({ API_KEYS, READ_API_KEY_NAMES: READER.name, MONGODB_URI: `mongodb://127.0.0.1:${proxy.port}/hangs`, MONGODB_TIMEOUT_MS: '1000' });
    const api = await startApi(config, silentLogger);
    try {
      const minted = createIdMinter(config.idSigningSecrets).newRecordId('ds_a');
      const read = (path: string) => fetch(`http://127.0.0.1:${api.port}${path}`, { headers: { Authorization: `Bearer ${READER.secret}` }, signal: AbortSignal.timeout(8_000) });
      // Connected and answering first: the record is pending (404), not a store failure (the
      // first reads may meet the bound while the client connects through the proxy).
      await eventually(async () => ((await read(`/feedback-record/${minted}`)).status === 404 ? true : undefined), 15_000, 'a 404 record_pending before the store hangs');
      held = true;
      // Sockets time out after 30 s here (6 × MONGODB_TIMEOUT_MS, at least 30 s); the bound is the read's own.
      // (Agreement and progress pass over a whole dataset and are not bounded so: docs/reading.md.)
      for (const path of [`/feedback-record/${minted}`, `/feedback-record/${minted}/history`, '/datasets/ds_a/records', '/datasets/ds_a/records?updated_since=2026-01-01T00:00:00Z', '/datasets/ds_a/export']) {
        const res = await read(path).catch((err: unknown) => {
          throw new Error(`${path}: no answer within 8 s (${(err as Error).message})`);
        });
        expect(res.status, path).to.equal(503);
        expect(((await res.json()) as { error: { code: string } }).error.code, path).to.equal('store_unavailable');
      }
    } finally {
      held = false;
      await proxy.close();
      await api.close();
    }
  });
});
