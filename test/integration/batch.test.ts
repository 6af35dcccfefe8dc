import { expect } from 'chai';
import fc from 'fast-check';
import { createApiKeyAdmin } from '../../shared/api-keys.js';
import { sharedServices } from '../helpers/root-hooks.js';
import { OTHER_KEY, testConfig } from '../helpers/env.js';
import { startRedis, type ManagedServer } from '../../devkit/servers.js';
import { startDelayProxy, type DelayProxy } from '../helpers/delay-proxy.js';
import { eventually, recordBody, records, responses, startStack, type HttpResult, type Stack } from '../helpers/stack.js';

/*
 * POST /feedback-batch through real HTTP, Redis and FerretDB: per-item validation, order,
 * exactly-once storage, idempotent replay, limits and scopes.
 */

type Json = Record<string, any>;

const batch = (items: unknown[]) => ({ items });

/** Waits until the store holds `n` records and `m` responses written by this suite's calls with `tag`. */
async function storedCounts(stack: Stack, tag: string, n: number, m: number): Promise<void> {
  await eventually(async () => ((await records(stack.db).countDocuments({ 'metadata.tag': tag })) >= n ? true : undefined), 20_000, `${n} records of ${tag}`);
  const ids = (await records(stack.db).find({ 'metadata.tag': tag }, { projection: { _id: 1 } }).toArray()).map((d) => d._id);
  await eventually(async () => ((await responses(stack.db).countDocuments({ feedback_record_id: { $in: ids } })) >= m ? true : undefined), 20_000, `${m} responses of ${tag}`);
}

function tagged(tag: string, externalId: string, response: Json = {}) {
  return recordBody({ record: { external_id: externalId, metadata: { tag } }, response });
}

function expectItemError(item: Json, index: number, status: number, code: string): void {
  expect(item, JSON.stringify(item)).to.have.all.keys('index', 'status', 'error');
  expect(item['index']).to.equal(index);
  expect(item['status']).to.equal(status);
  expect(item['error'].code).to.equal(code);
  expect(item['error'].message).to.be.a('string').with.length.greaterThan(0);
}

describe('POST /feedback-batch', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack(testConfig({ BATCH_REQUEST_MAX_ITEMS: '20', BODY_LIMIT_BYTES: '2048', API_KEYS_REFRESH_MS: '100' }));
  });
  after(async () => {
    await stack?.close();
  });

  it('answers 207 with each item in order: good items accepted and stored exactly once, bad items refused in the error shape with their index', async () => {
    const tag = 'mixed';
    const items = [
      tagged(tag, 'm-0'),
      { record: { feedback_dataset_id: 'ds_test' }, response: { values: { a: 1 } } }, // field_to_value missing
      tagged(tag, 'm-2', { status: 'draft' }),
      { feedback_record_id: 'rec_not_minted_here', response: { status: 'draft', values: { a: 1 } } },
      'not an object',
      tagged(tag, 'm-5'),
    ];
    const res = await stack.post('/feedback-batch', batch(items));
    expect(res.status, res.text).to.equal(207);
    expect(res.body.accepted).to.equal(3);
    expect(res.body.rejected).to.equal(3);
    const out = res.body.items as Json[];
    expect(out.map((i) => i['index'])).to.deep.equal([0, 1, 2, 3, 4, 5]);
    for (const i of [0, 2, 5]) {
      expect(out[i]!['status']).to.equal(200);
      expect(out[i]!['result']).to.have.all.keys('feedback_record_id', 'feedback_response_id', 'status');
    }
    expect(out[2]!['result'].status).to.equal('draft');
    expectItemError(out[1]!, 1, 400, 'validation_failed');
    expect(out[1]!['error'].details).to.deep.equal([{ path: 'record.field_to_value', message: 'is required' }]);
    expectItemError(out[3]!, 3, 404, 'record_not_found');
    expectItemError(out[4]!, 4, 400, 'validation_failed');

    await storedCounts(stack, tag, 3, 3);
    const stored = await records(stack.db).find({ 'metadata.tag': tag }).toArray();
    expect(stored.map((d) => d._id).sort()).to.deep.equal([0, 2, 5].map((i) => out[i]!['result'].feedback_record_id as string).sort());
    expect(stored.map((d) => d['external_id']).sort()).to.deep.equal(['m-0', 'm-2', 'm-5']);
  });

  it('a response item may answer a record of an earlier item of the same batch (record_index), and later items win over earlier ones', async () => {
    const tag = 'refs';
    const earlier = await stack.post('/feedback-record', tagged(tag, 'r-earlier'));
    expect(earlier.status).to.equal(200);
    const items = [
      tagged(tag, 'r-0'),
      { record_index: 0, response: { status: 'draft', values: { helpful: 2 }, user_id: 'annotator-a' } },
      { record_index: 0, response: { status: 'submitted', values: { helpful: 3 }, user_id: 'annotator-a' } },
      { feedback_record_id: earlier.body.feedback_record_id, response: { status: 'submitted', values: { helpful: 5 }, user_id: 'annotator-b' } },
      { record_index: 5, response: { status: 'draft', values: { x: 1 } } }, // not an earlier item
      { record_index: 3, response: { status: 'draft', values: { x: 1 } } }, // item 3 is a response, not a record
    ];
    const res = await stack.post('/feedback-batch', batch(items));
    expect(res.status, res.text).to.equal(207);
    const out = res.body.items as Json[];
    const recordId = out[0]!['result'].feedback_record_id as string;
    expect(out[1]!['result'].feedback_record_id).to.equal(recordId);
    expect(out[2]!['result'].feedback_response_id).to.equal(out[1]!['result'].feedback_response_id);
    expect(out[3]!['result'].feedback_record_id).to.equal(earlier.body.feedback_record_id);
    expectItemError(out[4]!, 4, 400, 'validation_failed');
    expectItemError(out[5]!, 5, 404, 'record_not_found');

    // The record's first response (tester) and annotator-a's response, whose last version wins.
    await storedCounts(stack, tag, 2, 4);
    const a = await eventually(async () => {
      const doc = await responses(stack.db).findOne({ _id: out[1]!['result'].feedback_response_id });
      return doc?.['status'] === 'submitted' ? doc : undefined;
    }, 20_000, 'annotator-a response');
    expect(a['feedback_record_id']).to.equal(recordId);
    expect(a['values']).to.deep.equal({ helpful: 3 });
    expect(await responses(stack.db).countDocuments({ feedback_record_id: recordId })).to.equal(2);
    const b = await responses(stack.db).findOne({ _id: out[3]!['result'].feedback_response_id });
    expect(b?.['values']).to.deep.equal({ helpful: 5 });
  });

  it('any mix of good and bad items: each item gets the status its kind calls for, at its index, and only the good ones are stored (fast-check)', async function () {
    this.timeout(60_000);
    const earlier = await stack.post('/feedback-record', tagged('prop-seed', 'p-seed'));
    // Each template: an item and the status a single call would answer it with.
    const templates: readonly { make: (i: number) => unknown; status: number }[] = [
      { make: (i) => tagged('prop', `p-${i}`), status: 200 },
      { make: () => ({ feedback_record_id: earlier.body.feedback_record_id, response: { status: 'draft', values: { x: 1 }, user_id: 'prop-annotator' } }), status: 200 },
      { make: () => ({ record: { feedback_dataset_id: '', field_to_value: { a: 1 } }, response: { values: { a: 1 } } }), status: 400 },
      { make: () => ({ feedback_record_id: 'rec_forged', response: { status: 'draft', values: { a: 1 } } }), status: 404 },
      { make: () => [1, 2], status: 400 },
      { make: () => ({ record_index: 100, response: { status: 'draft', values: { a: 1 } } }), status: 400 },
    ];
    let goodRecords = 0;
    let run = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(fc.integer({ min: 0, max: templates.length - 1 }), { minLength: 1, maxLength: 20 }), async (picks) => {
        run++;
        const items = picks.map((t, i) => templates[t]!.make(run * 100 + i));
        const res = await stack.post('/feedback-batch', batch(items));
        expect(res.status, res.text).to.equal(207);
        const out = res.body.items as Json[];
        expect(out.map((o) => o['index'])).to.deep.equal(picks.map((_, i) => i));
        expect(out.map((o) => o['status'])).to.deep.equal(picks.map((t) => templates[t]!.status));
        expect(res.body.accepted).to.equal(picks.filter((t) => templates[t]!.status === 200).length);
        goodRecords += picks.filter((t) => t === 0).length;
      }),
      { numRuns: 25, seed: Number(process.env['FUZZ_SEED'] ?? Date.now() % 2 ** 31) },
    );
    await eventually(async () => ((await records(stack.db).countDocuments({ 'metadata.tag': 'prop' })) >= goodRecords ? true : undefined), 30_000, `${goodRecords} records`);
    await eventually(async () => ((await stack.api.queue.getJobCountByTypes('waiting', 'active', 'delayed')) === 0 ? true : undefined), 30_000, 'queue drained');
    expect(await records(stack.db).countDocuments({ 'metadata.tag': 'prop' })).to.equal(goodRecords);
  });

  it('Idempotency-Key: a repeat returns the first answer, item by item, and stores nothing new; another body with the key is 409', async () => {
    const tag = 'idem';
    const body = batch([tagged(tag, 'i-0'), tagged(tag, 'i-1'), { record_index: 0, response: { status: 'draft', values: { n: 1 }, user_id: 'ann' } }]);
    const headers = { 'Idempotency-Key': 'batch-key-1' };
    const first = await stack.post('/feedback-batch', body, headers);
    expect(first.status, first.text).to.equal(207);
    const ids = (first.body.items as Json[]).map((i) => i['result'].feedback_record_id as string);
    expect(new Set(ids.slice(0, 2)).size, 'each item has its own record id').to.equal(2);
    const again = await stack.post('/feedback-batch', body, headers);
    expect(again.status).to.equal(207);
    expect(again.headers.get('idempotent-replayed')).to.equal('true');
    expect(again.body).to.deep.equal(first.body);
    const other = await stack.post('/feedback-batch', batch([tagged(tag, 'i-other')]), headers);
    expect(other.status).to.equal(409);
    expect(other.body.error.code).to.equal('idempotency_key_reused');

    await storedCounts(stack, tag, 2, 3);
    // The worker is idempotent too: wait for the queue to be empty before counting.
    await eventually(async () => ((await stack.api.queue.getJobCountByTypes('waiting', 'active', 'delayed')) === 0 ? true : undefined), 20_000, 'queue drained');
    expect(await records(stack.db).countDocuments({ 'metadata.tag': tag })).to.equal(2);
  });

  it('refuses the whole call with 400 validation_failed when it holds more than BATCH_REQUEST_MAX_ITEMS items, none, or no list', async () => {
    const tooMany = await stack.post('/feedback-batch', batch(Array.from({ length: 21 }, (_, i) => tagged('too-many', `t-${i}`))));
    expect(tooMany.status, tooMany.text).to.equal(400);
    expect(tooMany.body.error.code).to.equal('validation_failed');
    expect(tooMany.body.error.details).to.deep.equal([{ path: 'items', message: 'must hold at most 20 items (BATCH_REQUEST_MAX_ITEMS); split the batch' }]);
    const empty = await stack.post('/feedback-batch', batch([]));
    expect(empty.status).to.equal(400);
    expect(empty.body.error.details[0].path).to.equal('items');
    const unknown = await stack.post('/feedback-batch', { items: [tagged('x', 'x')], extra: 1 });
    expect(unknown.status).to.equal(400);
    expect(unknown.body.error.details).to.deep.equal([{ path: 'extra', message: 'is not a known property' }]);
    expect(await records(stack.db).countDocuments({ 'metadata.tag': 'too-many' })).to.equal(0);
  });

  it('takes a body larger than BODY_LIMIT_BYTES (single calls) up to BATCH_REQUEST_MAX_BYTES', async () => {
    const items = Array.from({ length: 10 }, (_, i) => tagged('big', `b-${i}`, { values: { comment: 'x'.repeat(300) } }));
    expect(JSON.stringify(batch(items)).length).to.be.greaterThan(2048);
    const res = await stack.post('/feedback-batch', batch(items));
    expect(res.status, res.text).to.equal(207);
    expect(res.body.accepted).to.equal(10);
    const single = await stack.post('/feedback-record', { ...tagged('big', 'single'), pad: 'x'.repeat(3000) });
    expect(single.status).to.equal(413);
  });

  it('an item larger than BODY_LIMIT_BYTES is 413 payload_too_large at its place (a batch is no way around the single limit, nor the store document limit); the others are stored', async () => {
    const items = [
      tagged('item-limit', 'small-0'),
      tagged('item-limit', 'huge', { values: { comment: 'x'.repeat(3000) } }),
      { record_index: 1, response: { status: 'draft', values: { helpful: 1 }, user_id: 'second' } },
      tagged('item-limit', 'small-3'),
    ];
    const res = await stack.post('/feedback-batch', batch(items));
    expect(res.status, res.text).to.equal(207);
    expect(res.body).to.include({ accepted: 2, rejected: 2 });
    expect(res.body.items.map((i: Json) => i['status'])).to.deep.equal([200, 413, 404, 200]);
    expectItemError(res.body.items[1], 1, 413, 'payload_too_large');
    await storedCounts(stack, 'item-limit', 2, 2);
    expect(await records(stack.db).countDocuments({ 'metadata.tag': 'item-limit', external_id: 'huge' })).to.equal(0);
  });

  it('a key scoped to datasets: items of other datasets are 403 forbidden, its own accepted', async () => {
    const admin = createApiKeyAdmin({ db: stack.db, reservedNames: stack.config.apiKeys.map((k) => k.name) });
    const { secret } = await admin.create({ name: 'batch-scoped', datasets: ['ds_a'] });
    const as = { Authorization: `Bearer ${secret}` };
    await eventually(async () => ((await stack.post('/feedback-record', recordBody({ record: { feedback_dataset_id: 'ds_a' } }), as)).status === 200 ? true : undefined), 10_000, 'scoped key loaded');
    const foreign = await stack.post('/feedback-record', recordBody({ record: { feedback_dataset_id: 'ds_b' } }), { Authorization: `Bearer ${OTHER_KEY.secret}` });
    const res = await stack.post('/feedback-batch', batch([
      recordBody({ record: { feedback_dataset_id: 'ds_a' } }),
      recordBody({ record: { feedback_dataset_id: 'ds_b' } }),
      { feedback_record_id: foreign.body.feedback_record_id, response: { status: 'draft', values: { a: 1 } } },
      { record_index: 0, response: { status: 'draft', values: { a: 1 }, user_id: 'u' } },
    ]), as);
    expect(res.status, res.text).to.equal(207);
    const out = res.body.items as Json[];
    expect(out.map((i) => i['status'])).to.deep.equal([200, 403, 403, 200]);
    expectItemError(out[1]!, 1, 403, 'forbidden');
    expectItemError(out[2]!, 2, 403, 'forbidden');
  });
});

describe('POST /feedback-batch with Redis down', () => {
  let redis: ManagedServer;
  let stack: Stack;
  before(async () => {
    redis = await startRedis();
    stack = await startStack(testConfig({ ENQUEUE_TIMEOUT_MS: '300' }, { redisUrl: redis.url, mongoUrl: sharedServices().mongoUrl }), { worker: false });
  });
  after(async () => {
    await redis.start().catch(() => undefined);
    await stack?.close();
    await redis?.destroy();
  });

  it('answers the whole call 503 queue_unavailable with Retry-After (no item is promised), and 207 once Redis is back', async () => {
    await redis.stop();
    const body = batch([recordBody(), recordBody()]);
    const down: HttpResult = await stack.post('/feedback-batch', body);
    expect(down.status, down.text).to.equal(503);
    expect(down.body.error.code).to.equal('queue_unavailable');
    expect(down.body.error.message).to.match(/retry the whole call with the same Idempotency-Key/);
    expect(down.headers.get('retry-after')).to.match(/^\d+$/);
    await redis.start();
    await eventually(async () => ((await stack.post('/feedback-batch', body)).status === 207 ? true : undefined), 20_000, 'a 207 after Redis came back');
  });
});

describe('POST /feedback-batch of many items', () => {
  let stack: Stack;
  let proxy: DelayProxy;
  before(async () => {
    // Redis 20 ms away (every chunk held 20 ms, in order) and one job in flight: each job is
    // acknowledged within a fraction of ENQUEUE_TIMEOUT_MS, the call's 30 jobs of 200 writes take
    // about three times it in all.
    const redisUrl = new URL(sharedServices().redisUrl);
    proxy = await startDelayProxy(Number(redisUrl.port), 20, () => 1);
    redisUrl.port = String(proxy.port);
    stack = await startStack(testConfig({ BATCH_REQUEST_MAX_ITEMS: '6000', BATCH_REQUEST_MAX_BYTES: String(8 * 1024 * 1024), BATCH_MAX_IN_FLIGHT: '1', ENQUEUE_TIMEOUT_MS: '600' }, { redisUrl: redisUrl.toString(), mongoUrl: sharedServices().mongoUrl }), { worker: false });
  });
  after(async () => {
    await stack?.close();
    await proxy?.close();
  });

  it('a call within the limits is 207 with every item accepted, however long its items wait for a job while Redis acknowledges the others', async () => {
    const items = Array.from({ length: 6000 }, (_, i) => tagged('many', `m${i}`));
    const res: HttpResult = await stack.post('/feedback-batch', batch(items));
    expect(res.status, res.text.slice(0, 300)).to.equal(207);
    expect(res.body.accepted).to.equal(6000);
    expect(res.body.rejected).to.equal(0);
  });
});
