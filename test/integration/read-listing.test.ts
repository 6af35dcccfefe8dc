import { expect } from 'chai';
import { OTHER_KEY, testConfig, TEST_KEY } from '../helpers/env.js';
import { byCreatedThenId, expectedView, insertSeed, seedDocs, type SeededRecord } from '../helpers/read-seed.js';
import { eventually, recordBody, records, startStack, type HttpResult, type Stack } from '../helpers/stack.js';

const READER = { name: 'reader', secret: 'reader-secret-key-0004' } as const;
const API_KEYS = [TEST_KEY, OTHER_KEY, READER].map((k) => `${k.name}:${k.secret}`).join(',');
const BASE_MS = Date.UTC(2026, 0, 1);

describe('GET /datasets/{dataset_id}/records', () => {
  let stack: Stack;
  let seeded: SeededRecord[];
  const get = (path: string): Promise<HttpResult> => stack.request(path, { headers: { Authorization: `Bearer ${READER.secret}` } });

  /** Follows next_cursor to the end; returns every item's id in the order received. */
  async function pageAll(dataset: string, query: string): Promise<{ ids: string[]; pages: number; items: any[] }> {
    const items: any[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const res = await get(`/datasets/${dataset}/records?${query}${cursor === null ? '' : `&cursor=${cursor}`}`);
      expect(res.status, res.text).to.equal(200);
      items.push(...res.body.items);
      cursor = res.body.next_cursor;
      pages++;
      expect(pages, 'pages').to.be.below(1000);
    } while (cursor !== null);
    return { ids: items.map((r) => r.feedback_record_id), pages, items };
  }

  before(async () => {
    stack = await startStack(testConfig({ API_KEYS, READ_API_KEY_NAMES: READER.name }));
    // 60 records, created_at shared by groups of 3 (ties broken by _id); record i has i % 3
    // responses, the last one updated at BASE + 1000 + i.
    seeded = seedDocs({
      datasetId: 'ds_list',
      count: 60,
      createdAtMs: (i) => BASE_MS + Math.floor(i / 3),
      responseTimesMs: (i, created) => Array.from({ length: i % 3 }, (_, j) => (j === (i % 3) - 1 ? BASE_MS + 1000 + i : created)),
    });
    await insertSeed(stack.db, seeded);
    await insertSeed(stack.db, seedDocs({ datasetId: 'ds_other', count: 5 }));
  });
  after(async () => {
    await stack?.close();
  });

  it('pages oldest first by (created_at, _id), records with their responses, each once', async () => {
    const all = await pageAll('ds_list', 'order=oldest&limit=7');
    const expected = [...seeded].sort(byCreatedThenId);
    expect(all.ids).to.deep.equal(expected.map((s) => s.record._id));
    expect(all.pages).to.equal(9);
    expect(all.items).to.deep.equal(expected.map((s) => expectedView(s)));
  });

  it('pages newest first (the default order), each record once, the reverse of oldest', async () => {
    const all = await pageAll('ds_list', 'limit=11');
    expect(all.ids).to.deep.equal([...seeded].sort(byCreatedThenId).reverse().map((s) => s.record._id));
  });

  it('limit defaults to 50 and must be 1-500; responses=false leaves the responses out', async () => {
    const first = await get('/datasets/ds_list/records');
    expect(first.body.items).to.have.length(50);
    expect(first.body.next_cursor).to.be.a('string');
    const bare = await get('/datasets/ds_list/records?limit=500&responses=false');
    expect(bare.body.items).to.have.length(60);
    expect(bare.body.next_cursor).to.equal(null);
    expect(bare.body.items[0]).to.not.have.property('responses');
    for (const bad of ['0', '501', '-1', 'abc', '1.5', '']) {
      const res = await get(`/datasets/ds_list/records?limit=${bad}`);
      expect(res.status, `limit=${bad}`).to.equal(400);
      expect(res.body.error.code).to.equal('validation_failed');
      expect(res.body.error.details[0].path).to.equal('query.limit');
    }
  });

  it('a cursor that is not one of ours, or that belongs to another order or updated_since, is 400 validation_failed', async () => {
    const page = await get('/datasets/ds_list/records?order=oldest&limit=5');
    const cursor: string = page.body.next_cursor;
    const cases = [
      'garbage!',
      'bm90LWEtY3Vyc29y',
      Buffer.from(JSON.stringify([1, 'o', 'x', 'id', null])).toString('base64url'),
      `${cursor}&order=newest`,
      `${cursor}&updated_since=2026-01-01T00:00:00Z`,
    ];
    for (const bad of cases) {
      const res = await get(`/datasets/ds_list/records?cursor=${bad}`);
      expect(res.status, bad).to.equal(400);
      expect(res.body.error.code, bad).to.equal('validation_failed');
      expect(res.body.error.details.map((d: { path: string }) => d.path), bad).to.include('query.cursor');
    }
    // Repeating the same order with the cursor is fine.
    expect((await get(`/datasets/ds_list/records?cursor=${cursor}&order=oldest`)).status).to.equal(200);
  });

  it('a cursor of one dataset is refused on another (400), and updated_since must name a time that exists', async () => {
    const page = await get('/datasets/ds_list/records?order=oldest&limit=5');
    const cursor: string = page.body.next_cursor;
    const elsewhere = await get(`/datasets/ds_other/records?cursor=${cursor}`);
    expect(elsewhere.status, elsewhere.text).to.equal(400);
    expect(elsewhere.body.error.details.map((d: { path: string }) => d.path)).to.include('query.cursor');
    expect((await get(`/datasets/ds_list/records?cursor=${cursor}`)).status).to.equal(200);
    for (const bad of ['2026-02-30T00:00:00Z', '2026-04-31T00:00:00Z', '2026-01-01T24:00:00Z', '2026-01-01T10:60:00Z', '2026-01-01T10:00:60Z', '2026-13-01T00:00:00Z', '2026-01-00T00:00:00Z', '2026-01-01T00:00:00+24:00', '2025-02-29T00:00:00Z']) {
      const res = await get(`/datasets/ds_list/records?updated_since=${encodeURIComponent(bad)}`);
      expect(res.status, bad).to.equal(400);
      expect(res.body.error.details[0].path, bad).to.equal('query.updated_since');
    }
    for (const good of ['2024-02-29T00:00:00Z', '2026-01-01T23:59:59.999+05:30', '2026-01-01T00:00Z']) {
      expect((await get(`/datasets/ds_list/records?updated_since=${encodeURIComponent(good)}`)).status, good).to.equal(200);
    }
  });

  it('export refuses unknown query parameters as /records does', async () => {
    const res = await get('/datasets/ds_list/export?colour=red');
    expect(res.status, res.text).to.equal(400);
    expect(res.body.error.details[0].path).to.equal('query.colour');
    expect((await get('/datasets/ds_list/export')).status).to.equal(200);
  });

  it('a dataset id with a NUL or another control character is 400 before the store is asked', async () => {
    for (const path of ['/datasets/a%00b/records', '/datasets/a%00b/export', '/datasets/a%1Fb/records', '/datasets/%24bad/records', '/datasets/__proto__/records']) {
      const res = await get(path);
      expect(res.status, `${path}: ${res.text}`).to.equal(400);
      expect(res.body.error.code).to.equal('validation_failed');
      expect(res.body.error.details[0].path).to.equal('path.dataset_id');
    }
  });

  it('a path whose percent-encoding does not decode is 400 (not read as an id of that text); a % escaped as %25 is a dataset id like any other', async () => {
    for (const path of ['/datasets/%E0%A4%A/records', '/datasets/a%ZZ/export', '/feedback-record/%E0%A4%A', '/datasets/%/progress']) {
      const res = await get(path);
      expect(res.status, `${path}: ${res.text}`).to.equal(400);
      expect(res.body.error.details[0]).to.include({ path: 'path' });
    }
    expect((await get('/datasets/a%25b/records')).status).to.equal(200);
  });

  it('bad query parameters are 400 validation_failed with every problem in details', async () => {
    const res = await get('/datasets/ds_list/records?order=sideways&updated_since=yesterday&responses=maybe&colour=red');
    expect(res.status).to.equal(400);
    expect(res.body.error.code).to.equal('validation_failed');
    expect(res.body.error.details.map((d: { path: string }) => d.path).sort()).to.deep.equal(['query.colour', 'query.order', 'query.responses', 'query.updated_since']);
    const noOffset = await get('/datasets/ds_list/records?updated_since=2026-01-01T00:00:00');
    expect(noOffset.status, 'a time without an offset is ambiguous').to.equal(400);
    const tooLong = await get(`/datasets/${'d'.repeat(257)}/records`);
    expect(tooLong.status).to.equal(400);
    expect(tooLong.body.error.details[0].path).to.equal('path.dataset_id');
  });

  it('updated_since: records created or updated since then, or with a response created or updated since then', async () => {
    // Records 0-29 were created before T; of those, the ones with responses updated at BASE+1000+i >= T are in.
    const t = BASE_MS + 1000 + 20;
    const all = await pageAll('ds_list', `order=oldest&limit=4&updated_since=${new Date(t).toISOString()}`);
    const expected = seeded.filter((s) => s.record.updated_at.getTime() >= t || s.responses.some((r) => r.updated_at.getTime() >= t)).sort(byCreatedThenId);
    expect(expected.length).to.be.within(20, 40);
    expect(all.ids).to.deep.equal(expected.map((s) => s.record._id));
    // Since before every record: all of them.
    expect((await pageAll('ds_list', `limit=500&updated_since=${new Date(BASE_MS).toISOString()}`)).ids).to.have.length(60);
    // Since after everything: none, and no cursor.
    const none = await get(`/datasets/ds_list/records?updated_since=${encodeURIComponent('2030-01-01T00:00:00+02:00')}`);
    expect(none.body).to.deep.equal({ items: [], next_cursor: null });
  });

  it('an unknown dataset is an empty page, not an error', async () => {
    expect((await get('/datasets/ds_nothing_here/records')).body).to.deep.equal({ items: [], next_cursor: null });
  });

  it('while writes keep arriving, every record stored before paging began is seen exactly once, both orders', async function () {
    this.timeout(120_000);
    const dataset = 'ds_live';
    const write = (n: number) => stack.post('/feedback-record', recordBody({ record: { feedback_dataset_id: dataset, field_to_value: { prompt: `p${n}` } } }));
    for (let i = 0; i < 60; i += 20) {
      const batch = await Promise.all(Array.from({ length: 20 }, (_, j) => write(i + j)));
      for (const r of batch) expect(r.status).to.equal(200);
    }
    const stored = () => records(stack.db).countDocuments({ feedback_dataset_id: dataset });
    await eventually(async () => ((await stored()) >= 60 ? true : undefined), 20_000, 'the first 60 records stored');
    const before = new Set((await records(stack.db).find({ feedback_dataset_id: dataset }, { projection: { _id: 1 } }).toArray()).map((d) => d._id));

    for (const order of ['newest', 'oldest'] as const) {
      const seen: string[] = [];
      let cursor: string | null = null;
      let n = 1000;
      let pages = 0;
      do {
        const res = await get(`/datasets/${dataset}/records?order=${order}&limit=7&responses=false${cursor === null ? '' : `&cursor=${cursor}`}`);
        expect(res.status, res.text).to.equal(200);
        seen.push(...res.body.items.map((r: { feedback_record_id: string }) => r.feedback_record_id));
        cursor = res.body.next_cursor;
        pages++;
        // Between two pages, new records are stored (some accepted before the page just read,
        // some after): the next page must neither repeat nor skip because of them.
        const count = await stored();
        const burst = await Promise.all(Array.from({ length: 3 }, () => write(n++)));
        for (const r of burst) expect(r.status).to.equal(200);
        await eventually(async () => ((await stored()) >= count + 3 ? true : undefined), 20_000, 'the burst stored');
      } while (cursor !== null && pages < 200);
      const counts = new Map<string, number>();
      for (const id of seen) counts.set(id, (counts.get(id) ?? 0) + 1);
      const repeated = [...counts].filter(([, c]) => c > 1).map(([id]) => id);
      expect(repeated, `${order}: repeated ids`).to.deep.equal([]);
      const missed = [...before].filter((id) => !counts.has(id));
      expect(missed, `${order}: records stored before paging began and never seen`).to.deep.equal([]);
      expect(pages, `${order}: pages`).to.be.above(8);
    }
  });
});
