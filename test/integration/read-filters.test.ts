import { expect } from 'chai';
import type { RecordDoc } from '../../shared/documents.js';
import { createFeedbackClient } from '../../client/index.js';
import { OTHER_KEY, testConfig, TEST_KEY } from '../helpers/env.js';
import { byCreatedThenId, expectedView, insertSeed, seedDocs, type SeededRecord } from '../helpers/read-seed.js';
import { eventually, recordBody, records, responses, startStack, type HttpResult, type Stack } from '../helpers/stack.js';

const READER = { name: 'reader', secret: 'reader-secret-key-0004' } as const;
const API_KEYS = [TEST_KEY, OTHER_KEY, READER].map((k) => `${k.name}:${k.secret}`).join(',');
const BASE_MS = Date.UTC(2026, 0, 1);
const RECORD_STATUSES = ['submitted', 'pending', 'completed'] as const;
const RESPONSE_STATUSES = ['submitted', 'draft', 'discarded'] as const;

/**
 * Record i: status RECORD_STATUSES[i % 3] (set in the store directly: the completion rule writes
 * it elsewhere), metadata of several types, and i % 4 responses by annotator-0.. with status
 * RESPONSE_STATUSES[(i + j) % 3].
 */
function filterSeed(datasetId: string, count: number): SeededRecord[] {
  return seedDocs({ datasetId, count, createdAtMs: (i) => BASE_MS + Math.floor(i / 4), responseTimesMs: (i, created) => Array.from({ length: i % 4 }, () => created) }).map((s, i) => ({
    record: {
      ...s.record,
      status: RECORD_STATUSES[i % 3]! as RecordDoc['status'],
      metadata: { n: i, model: i % 2 === 0 ? 'even' : 'odd', flag: i % 5 === 0, turn: i % 3 === 0 ? i % 7 : String(i % 7), tags: [`t${i % 2}`] },
    },
    responses: s.responses.map((r, j) => ({ ...r, status: RESPONSE_STATUSES[(i + j) % 3]! })),
  }));
}

describe('GET /datasets/{dataset_id}/records and /export: filters', () => {
  let stack: Stack;
  let seeded: SeededRecord[];
  const auth = { Authorization: `Bearer ${READER.secret}` };
  const get = (path: string): Promise<HttpResult> => stack.request(path, { headers: auth });

  /** Follows next_cursor (repeating the query) to the end; every item and the page sizes. */
  async function pageAll(dataset: string, query: string): Promise<{ ids: string[]; items: any[]; sizes: number[] }> {
    const items: any[] = [];
    const sizes: number[] = [];
    let cursor: string | null = null;
    do {
      const res = await get(`/datasets/${dataset}/records?${query}${cursor === null ? '' : `&cursor=${cursor}`}`);
      expect(res.status, res.text).to.equal(200);
      items.push(...res.body.items);
      sizes.push(res.body.items.length);
      cursor = res.body.next_cursor;
      expect(sizes.length, 'pages').to.be.below(2000);
    } while (cursor !== null);
    return { ids: items.map((r) => r.feedback_record_id), items, sizes };
  }

  async function exportIds(dataset: string, query: string): Promise<string[]> {
    const res = await fetch(`${stack.baseUrl}/datasets/${dataset}/export?${query}`, { headers: auth });
    expect(res.status).to.equal(200);
    const text = await res.text();
    return text === '' ? [] : text.slice(0, -1).split('\n').map((l) => (JSON.parse(l) as { feedback_record_id: string }).feedback_record_id).sort();
  }

  before(async function () {
    this.timeout(60_000);
    stack = await startStack(testConfig({ API_KEYS, READ_API_KEY_NAMES: READER.name }));
    seeded = filterSeed('ds_filter', 120);
    await insertSeed(stack.db, seeded);
    await insertSeed(stack.db, filterSeed('ds_filter_other', 12));
  });
  after(async () => {
    await stack?.close();
  });

  const hasResponse = (s: SeededRecord, user?: string, status?: string) => s.responses.some((r) => (user === undefined || r.user_id === user) && (status === undefined || r.status === status));
  const meta = (s: SeededRecord) => s.record.metadata as Record<string, unknown>;
  const cases: { query: string; keep: (s: SeededRecord) => boolean }[] = [
    { query: 'status=pending', keep: (s) => (s.record.status as string) === 'pending' },
    { query: 'status=completed', keep: (s) => (s.record.status as string) === 'completed' },
    { query: 'status=submitted', keep: (s) => s.record.status === 'submitted' },
    { query: 'user_id=annotator-2', keep: (s) => hasResponse(s, 'annotator-2') },
    { query: 'response_status=draft', keep: (s) => hasResponse(s, undefined, 'draft') },
    { query: 'user_id=annotator-1&response_status=submitted', keep: (s) => hasResponse(s, 'annotator-1', 'submitted') },
    { query: 'metadata.model=odd', keep: (s) => meta(s)['model'] === 'odd' },
    { query: 'metadata.flag=true', keep: (s) => meta(s)['flag'] === true },
    { query: 'metadata.turn=3', keep: (s) => meta(s)['turn'] === 3 || meta(s)['turn'] === '3' },
    { query: 'metadata.n=17', keep: (s) => meta(s)['n'] === 17 },
    { query: 'status=completed&metadata.model=even&user_id=annotator-0&response_status=discarded', keep: (s) => (s.record.status as string) === 'completed' && meta(s)['model'] === 'even' && hasResponse(s, 'annotator-0', 'discarded') },
    { query: 'status=pending&updated_since=2026-01-01T00:00:00.020Z&user_id=annotator-0', keep: (s) => (s.record.status as string) === 'pending' && s.record.updated_at.getTime() >= BASE_MS + 20 && hasResponse(s, 'annotator-0') },
  ];
  for (const { query, keep } of cases) {
    it(`${query}: the matching records, each once, in order both ways, with their responses; the export the same set`, async () => {
      const expected = seeded.filter(keep).sort(byCreatedThenId);
      expect(expected.length, 'the seed has matches and non-matches').to.be.within(1, seeded.length - 1);
      const oldest = await pageAll('ds_filter', `order=oldest&limit=4&${query}`);
      expect(oldest.ids).to.deep.equal(expected.map((s) => s.record._id));
      expect(oldest.items).to.deep.equal(expected.map((s) => expectedView(s)));
      const newest = await pageAll('ds_filter', `limit=3&responses=false&${query}`);
      expect(newest.ids).to.deep.equal(expected.map((s) => s.record._id).reverse());
      expect(newest.items[0]).to.not.have.property('responses');
      if (!query.includes('updated_since')) expect(await exportIds('ds_filter', query)).to.deep.equal(expected.map((s) => s.record._id).sort());
    });
  }

  it('metadata values: a string that looks like a number or a boolean also matches that number or boolean, other text only the string', async () => {
    const other = seedDocs({ datasetId: 'ds_filter_types', count: 6 });
    const values: unknown[] = ['3', 3, 3.0, true, 'true', '03'];
    other.forEach((s, i) => (s.record.metadata = { v: values[i] }));
    await insertSeed(stack.db, other);
    const ids = async (q: string) => (await pageAll('ds_filter_types', `order=oldest&${q}`)).ids;
    expect(await ids('metadata.v=3')).to.deep.equal([0, 1, 2].map((i) => other[i]!.record._id));
    expect(await ids('metadata.v=3.0')).to.deep.equal([1, 2].map((i) => other[i]!.record._id));
    expect(await ids('metadata.v=true')).to.deep.equal([3, 4].map((i) => other[i]!.record._id));
    expect(await ids('metadata.v=03')).to.deep.equal([other[5]!.record._id]);
    expect(await ids('metadata.v=nothing')).to.deep.equal([]);
    expect(await ids('metadata.absent=3')).to.deep.equal([]);
  });

  it('a cursor is refused (400) with other filters than its first page, and accepted with the same ones in another order', async () => {
    const first = await get('/datasets/ds_filter/records?limit=2&status=pending&metadata.model=odd&metadata.flag=false');
    expect(first.status, first.text).to.equal(200);
    const cursor: string = first.body.next_cursor;
    expect(cursor).to.be.a('string');
    for (const other of ['', 'status=pending', 'status=completed&metadata.model=odd&metadata.flag=false', 'status=pending&metadata.model=odd&metadata.flag=false&user_id=annotator-0']) {
      const res = await get(`/datasets/ds_filter/records?limit=2&${other}&cursor=${cursor}`);
      expect(res.status, other).to.equal(400);
      expect(res.body.error.details.map((d: { path: string }) => d.path), other).to.include('query.cursor');
    }
    expect((await get(`/datasets/ds_filter/records?limit=2&metadata.flag=false&metadata.model=odd&status=pending&cursor=${cursor}`)).status).to.equal(200);
    // An unfiltered cursor is refused with filters.
    const plain = (await get('/datasets/ds_filter/records?limit=2')).body.next_cursor as string;
    expect((await get(`/datasets/ds_filter/records?status=pending&cursor=${plain}`)).status).to.equal(400);
  });

  it('the typed client sends the filters (metadata as metadata.<key>), repeats them with every cursor, and filters the export', async () => {
    const client = createFeedbackClient({ baseUrl: stack.baseUrl, apiKey: READER.secret });
    const keep = (s: SeededRecord) => (s.record.status as string) === 'pending' && (meta(s)['turn'] === 3 || meta(s)['turn'] === '3') && hasResponse(s, 'annotator-0');
    const expected = seeded.filter(keep).sort(byCreatedThenId).map((s) => s.record._id);
    expect(expected.length).to.be.above(1);
    const filters = { status: 'pending', user_id: 'annotator-0', metadata: { turn: 3 } } as const;
    const page = await client.listRecords('ds_filter', { ...filters, order: 'oldest', limit: 1 });
    expect(page.items.map((r) => r.feedback_record_id)).to.deep.equal(expected.slice(0, 1));
    const all: string[] = [];
    for await (const r of client.iterateRecords('ds_filter', { ...filters, order: 'oldest', limit: 1 })) all.push(r.feedback_record_id);
    expect(all).to.deep.equal(expected);
    const exported: string[] = [];
    for await (const r of client.exportRecords('ds_filter', {}, filters)) exported.push(r.feedback_record_id);
    expect(exported.sort()).to.deep.equal([...expected].sort());
  });

  it('bad filters are 400 validation_failed naming each parameter, on /records and /export', async () => {
    const bad: [string, string][] = [
      ['status=done', 'query.status'],
      ['response_status=maybe', 'query.response_status'],
      ['user_id=', 'query.user_id'],
      [`user_id=${'u'.repeat(257)}`, 'query.user_id'],
      ['metadata.%24where=1', 'query.metadata'],
      ['metadata.a.b=1', 'query.metadata'],
      ['metadata.=1', 'query.metadata'],
      ['metadata.__proto__=1', 'query.metadata'],
      ['metadata=1', 'query.metadata'],
      ['metadata.k=1&metadata.k=2', 'query.metadata.k'],
      ['status=pending&status=completed', 'query.status'],
      [`metadata.k=${'v'.repeat(1025)}`, 'query.metadata.k'],
      [Array.from({ length: 11 }, (_, i) => `metadata.k${i}=1`).join('&'), 'query.metadata'],
      ['colour=red', 'query.colour'],
    ];
    for (const [query, path] of bad) {
      for (const endpoint of ['records', 'export']) {
        const res = await get(`/datasets/ds_filter/${endpoint}?${query}`);
        expect(res.status, `${endpoint}?${query}: ${res.text.slice(0, 300)}`).to.equal(400);
        expect(res.body.error.code).to.equal('validation_failed');
        const paths: string[] = res.body.error.details.map((d: { path: string }) => d.path);
        expect(paths.some((p) => p === path || p.startsWith(`${path}.`) || p.startsWith(`${path}[`)), `${endpoint}?${query}: ${paths.join(', ')}`).to.equal(true);
      }
    }
    // The messages say what is wrong, not what the schema expected.
    const messages = async (query: string) => (await get(`/datasets/ds_filter/records?${query}`)).body.error.details.map((d: { message: string }) => d.message);
    expect(await messages('metadata=1')).to.deep.equal(['give metadata filters as metadata.<key>=<value> (a parameter named metadata alone is not one)']);
    expect(await messages('status=pending&status=completed')).to.deep.equal(['must be given once']);
  });

  it('user_id on a dataset where it is rare: a page looks at most 5,000 records, may come back short with a cursor, and paging still finds every match once', async function () {
    this.timeout(120_000);
    const rare = [3, 6_500, 6_501, 11_999];
    const sparse: SeededRecord[] = seedDocs({ datasetId: 'ds_filter_sparse', count: 12_000, createdAtMs: (i) => BASE_MS + i, responseTimesMs: (i, created) => (rare.includes(i) ? [created] : []) }).map((s) => ({
      record: s.record,
      responses: s.responses.map((r) => ({ ...r, user_id: 'rare-annotator' })),
    }));
    await insertSeed(stack.db, sparse, 2000);
    const all = await pageAll('ds_filter_sparse', 'order=oldest&limit=2&responses=false&user_id=rare-annotator');
    expect(all.ids).to.deep.equal(rare.map((i) => sparse[i]!.record._id));
    // Page 1 looks at records 0-4999 (one match, then the budget), page 2 at 5000-9999 (two
    // matches, no third before the budget), page 3 at the rest (one, then the end).
    expect(all.sizes).to.deep.equal([1, 2, 1]);
    const newest = await pageAll('ds_filter_sparse', 'limit=1&responses=false&user_id=rare-annotator');
    expect(newest.ids).to.deep.equal(rare.map((i) => sparse[i]!.record._id).reverse());
    expect(await exportIds('ds_filter_sparse', 'user_id=rare-annotator')).to.deep.equal(rare.map((i) => sparse[i]!.record._id).sort());
  });

  it('while writes arrive and statuses change, filtered paging returns no record twice and every record that matched throughout once, both orders', async function () {
    this.timeout(180_000);
    const dataset = 'ds_filter_live';
    let n = 0;
    /** A record with metadata.model odd/even and a response by annotator-live or someone else. */
    const write = () => {
      const i = n++;
      return stack.post('/feedback-record', recordBody({ record: { feedback_dataset_id: dataset, field_to_value: { prompt: `p${i}` }, metadata: { model: i % 2 === 0 ? 'even' : 'odd' } }, response: { user_id: i % 3 === 0 ? 'annotator-live' : 'someone' } }));
    };
    for (let i = 0; i < 4; i++) {
      const batch = await Promise.all(Array.from({ length: 20 }, write));
      for (const r of batch) expect(r.status).to.equal(200);
    }
    const stored = () => records(stack.db).countDocuments({ feedback_dataset_id: dataset });
    await eventually(async () => ((await stored()) >= 80 ? true : undefined), 30_000, 'the first 80 records stored');
    await eventually(async () => ((await responses(stack.db).countDocuments({ feedback_dataset_id: dataset })) >= 80 ? true : undefined), 30_000, 'their responses stored');
    // Half the records pending, half completed, set in the store (as the completion rule would).
    // In pairs of the id order, not every other one: ids follow the acceptance order closely, so
    // every other id would be nearly every other write, that is nearly one parity of the model,
    // and "pending and odd" could match only a handful (it once matched 6, two pages of 3).
    const all = await records(stack.db).find({ feedback_dataset_id: dataset }).sort({ _id: 1 }).toArray();
    const pendingIds = all.filter((_, i) => i % 4 < 2).map((d) => d._id);
    await records(stack.db).updateMany({ _id: { $in: pendingIds } }, { $set: { status: 'pending' } as never });
    await records(stack.db).updateMany({ feedback_dataset_id: dataset, _id: { $nin: pendingIds } }, { $set: { status: 'completed' } as never });
    const byId = new Map(all.map((d) => [d._id, d]));
    const liveRsp = new Set((await responses(stack.db).find({ feedback_dataset_id: dataset, user_id: 'annotator-live' }).toArray()).map((r) => r.feedback_record_id));

    for (const order of ['newest', 'oldest'] as const) {
      for (const filter of ['status=pending&metadata.model=odd', 'user_id=annotator-live', 'status=completed&response_status=submitted']) {
        // Records that match before paging and are never changed while paging.
        const stable = new Set([...byId.keys()].filter((id) => !pendingIds.slice(0, 10).includes(id)));
        const matches = (id: string): boolean => {
          const doc = byId.get(id)!;
          const status = pendingIds.includes(id) ? 'pending' : 'completed';
          if (filter.startsWith('status=pending')) return status === 'pending' && (doc.metadata as Record<string, unknown>)['model'] === 'odd';
          if (filter.startsWith('user_id')) return liveRsp.has(id);
          return status === 'completed';
        };
        const expected = [...stable].filter(matches);
        // More than two pages of 3 match throughout, so that paging crosses the writes between pages.
        expect(expected.length, filter).to.be.above(6);
        const seen: string[] = [];
        let cursor: string | null = null;
        let pages = 0;
        do {
          const res = await get(`/datasets/${dataset}/records?order=${order}&limit=3&responses=false&${filter}${cursor === null ? '' : `&cursor=${cursor}`}`);
          expect(res.status, res.text).to.equal(200);
          seen.push(...res.body.items.map((r: { feedback_record_id: string }) => r.feedback_record_id));
          cursor = res.body.next_cursor;
          pages++;
          // Between two pages: new records (some matching), and the first ten pending records
          // flip to completed and back (a record moving between the status index's ranges).
          const count = await stored();
          const burst = await Promise.all(Array.from({ length: 3 }, write));
          for (const r of burst) expect(r.status).to.equal(200);
          await records(stack.db).updateMany({ _id: { $in: pendingIds.slice(0, 10) } }, { $set: { status: pages % 2 === 0 ? 'pending' : 'completed' } as never });
          await eventually(async () => ((await stored()) >= count + 3 ? true : undefined), 20_000, 'the burst stored');
        } while (cursor !== null && pages < 300);
        const counts = new Map<string, number>();
        for (const id of seen) counts.set(id, (counts.get(id) ?? 0) + 1);
        expect([...counts].filter(([, c]) => c > 1).map(([id]) => id), `${order} ${filter}: repeated`).to.deep.equal([]);
        expect(expected.filter((id) => !counts.has(id)), `${order} ${filter}: matched throughout, never seen`).to.deep.equal([]);
        expect(pages, `${order} ${filter}: pages`).to.be.above(2);
      }
      // Leave the flipping records pending again for the next order.
      await records(stack.db).updateMany({ _id: { $in: pendingIds.slice(0, 10) } }, { $set: { status: 'pending' } as never });
    }
  });
});
