import { expect } from 'chai';
import type { CommandStartedEvent } from 'mongodb';
import { OTHER_KEY, testConfig, TEST_KEY } from '../helpers/env.js';
import { expectedView, insertSeed, seedDocs, type SeededRecord } from '../helpers/read-seed.js';
import { eventually, startStack, type Stack } from '../helpers/stack.js';

const READER = { name: 'reader', secret: 'reader-secret-key-0004' } as const;
const API_KEYS = [TEST_KEY, OTHER_KEY, READER].map((k) => `${k.name}:${k.secret}`).join(',');

function byId(items: readonly Record<string, unknown>[]): Record<string, unknown>[] {
  return [...items].sort((a, b) => String(a['feedback_record_id']).localeCompare(String(b['feedback_record_id'])));
}

describe('GET /datasets/{dataset_id}/export', () => {
  let stack: Stack;
  let seeded: SeededRecord[];
  let other: SeededRecord[];
  const auth = { Authorization: `Bearer ${READER.secret}` };

  before(async function () {
    this.timeout(60_000);
    // No worker runs in this suite.
    const config = testConfig({ API_KEYS, READ_API_KEY_NAMES: READER.name });
    // Command monitoring on the API's own client: the test watches its find and killCursors.
    stack = await startStack({ ...config, mongodbUri: `${config.mongodbUri}?monitorCommands=true` }, { worker: false });
    // 1,200 records (more than two export batches), 0-2 responses each.
    seeded = seedDocs({ datasetId: 'ds_export', count: 1200, responseTimesMs: (i, created) => Array.from({ length: i % 3 }, (_, j) => created + j) });
    await insertSeed(stack.db, seeded);
    other = seedDocs({ datasetId: 'ds_export_other', count: 24, responseTimesMs: (i, created) => Array.from({ length: i % 3 }, (_, j) => created + j) });
    await insertSeed(stack.db, other);
  });
  after(async () => {
    await stack?.close();
  });

  it('streams NDJSON: one line per stored record with its responses, every record of the dataset once, responses by one $in per batch', async () => {
    const commands: CommandStartedEvent[] = [];
    const listener = (e: CommandStartedEvent) => commands.push(e);
    stack.api.mongo.on('commandStarted', listener);
    let text: string;
    try {
      const res = await fetch(`${stack.baseUrl}/datasets/ds_export/export`, { headers: auth });
      expect(res.status).to.equal(200);
      expect(res.headers.get('content-type')).to.match(/^application\/x-ndjson/);
      text = await res.text();
    } finally {
      stack.api.mongo.off('commandStarted', listener);
    }
    expect(text.endsWith('\n')).to.equal(true);
    const lines = text.slice(0, -1).split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines).to.have.length(1200);
    expect(byId(lines)).to.deep.equal(byId(seeded.map((s) => expectedView(s))));
    const responseFinds = commands.filter((c) => c.commandName === 'find' && c.command['find'] === 'feedback_responses');
    expect(responseFinds.length, 'one responses query per batch of 500 records').to.equal(3);
    for (const c of responseFinds) expect(c.command['filter'].feedback_record_id.$in).to.be.an('array');
  });

  it('an empty or unknown dataset is 200 with an empty body', async () => {
    const res = await fetch(`${stack.baseUrl}/datasets/ds_none/export`, { headers: auth });
    expect(res.status).to.equal(200);
    expect(await res.text()).to.equal('');
  });

  it('a client that disconnects mid-stream stops the export: it never read the whole dataset ahead of it', async function () {
    this.timeout(60_000);
    // 4,000 records of 5 KB: 20 MB in 8 pages, far more than socket buffers hold.
    await insertSeed(stack.db, seedDocs({ datasetId: 'ds_big', count: 4000, fillerChars: 5000, responseTimesMs: () => [] }), 500);
    const client = stack.api.mongo;
    const pages: CommandStartedEvent[] = [];
    const onStarted = (e: CommandStartedEvent) => {
      if (e.commandName === 'find' && e.command['find'] === 'feedback_records') pages.push(e);
    };
    client.on('commandStarted', onStarted);
    try {
      const abort = new AbortController();
      const res = await fetch(`${stack.baseUrl}/datasets/ds_big/export`, { headers: auth, signal: abort.signal });
      expect(res.status).to.equal(200);
      const reader = res.body!.getReader();
      const first = await reader.read();
      expect(first.done).to.equal(false);
      expect(new TextDecoder().decode(first.value).split('\n')[0]).to.match(/^\{"feedback_record_id":"ds_big-rec-/);
      abort.abort();
      await reader.cancel().catch(() => undefined);
      // Settled: no page query for 1 s (bounded).
      let seen = -1;
      await eventually(async () => {
        const now = pages.length;
        if (now === seen) return true;
        seen = now;
        await new Promise((r) => setTimeout(r, 1_000));
        return undefined;
      }, 20_000, 'the export to stop');
      expect(pages.length, 'pages read').to.be.below(8);
    } finally {
      client.off('commandStarted', onStarted);
    }
  });

  it('a record whose status changes while the export streams is written once (a completion recount moves it in the status index)', async function () {
    this.timeout(60_000);
    // 3,000 pending records of 2 KB (6 pages, more than socket buffers hold), all completed once the first lines are read.
    const docs = seedDocs({ datasetId: 'ds_moving', count: 3000, fillerChars: 2000, responseTimesMs: () => [] }).map((d) => ({ ...d, record: { ...d.record, status: 'pending' as const } }));
    await insertSeed(stack.db, docs, 500);
    const res = await fetch(`${stack.baseUrl}/datasets/ds_moving/export`, { headers: auth });
    expect(res.status).to.equal(200);
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    const first = await reader.read();
    text += decoder.decode(first.value, { stream: true });
    // As the worker's recounts write it: every record changes status (and row) while the export is under way.
    await stack.db.collection('feedback_records').updateMany({ feedback_dataset_id: 'ds_moving' }, { $set: { status: 'completed', completed_seq: 1 } });
    for (;;) {
      const next = await reader.read();
      if (next.done) break;
      text += decoder.decode(next.value, { stream: true });
    }
    const ids = text.split('\n').filter((l) => l !== '').map((l) => (JSON.parse(l) as { feedback_record_id: string }).feedback_record_id);
    expect(new Set(ids).size, 'distinct records').to.equal(3000);
    expect(ids.length, 'lines').to.equal(3000);
  });
});
