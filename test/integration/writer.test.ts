import { expect } from 'chai';
import { MongoClient, type CommandStartedEvent, type Db } from 'mongodb';
import { COLLECTIONS, mongoClientOptions } from '../../shared/mongo.js';
import { ensureIndexes } from '../../worker/indexes.js';
import { BACKLOG_ROUND_WRITES, createFeedbackWriter, type FeedbackWriter, type WriteResult } from '../../worker/writer.js';
import type { SequencedWrite } from '../../worker/documents.js';
import { earlierVersions, type ResponseDoc } from '../../shared/documents.js';
import { sqlStateCode, TransientStoreError } from '../../worker/errors.js';
import { uniqueName } from '../helpers/env.js';
import { sharedServices } from '../helpers/root-hooks.js';
import { startFerretDb } from '../../devkit/servers.js';
import { OVERSIZE_TEXT } from '../helpers/oversize.js';
import { eventually, silentLogger } from '../helpers/stack.js';
import { recordWrite, shuffled, version } from '../helpers/writes.js';
import { gate, holdingCall } from '../helpers/held-calls.js';

describe('worker writer (order, races, store limits) on the real store', () => {
  let client: MongoClient;
  let db: Db;
  const clients: MongoClient[] = [];

  async function newWriter(options: { monitor?: (e: CommandStartedEvent) => void; maxBatchWrites?: number } = {}): Promise<FeedbackWriter> {
    const c = new MongoClient(sharedServices().mongoUrl, { ...mongoClientOptions(), monitorCommands: options.monitor !== undefined, retryWrites: false });
    if (options.monitor !== undefined) c.on('commandStarted', options.monitor);
    clients.push(c);
    return createFeedbackWriter({ db: c.db(db.databaseName), logger: silentLogger, ...(options.maxBatchWrites === undefined ? {} : { maxBatchWrites: options.maxBatchWrites }) });
  }

  beforeEach(async () => {
    client = new MongoClient(sharedServices().mongoUrl, { ...mongoClientOptions(), retryWrites: false });
    db = client.db(uniqueName('writer').replace(/-/g, '_'));
    await ensureIndexes(db);
  });
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close()));
    await db.dropDatabase().catch(() => undefined);
    await client.close();
  });

  const stored = () => db.collection<{ _id: string; seq: number; values: Record<string, unknown>; status: string; created_at: Date }>(COLLECTIONS.responses);

  it('busy() (webhook deliveries keep to a share meanwhile): while a backlog-sized round runs and shortly after, never for small rounds', async () => {
    const w = await newWriter();
    await w.write([recordWrite(1)]);
    expect(w.busy(), 'after a round of one write').to.equal(false);
    const big = w.write(Array.from({ length: BACKLOG_ROUND_WRITES }, (_, i) => recordWrite(100 + i)));
    await new Promise((r) => setImmediate(r));
    expect(w.busy(), 'while a round of a backlog runs').to.equal(true);
    await big;
    await eventually(async () => (w.busy() ? undefined : true), 5_000, 'busy() false again after the round');
    await w.write([recordWrite(2)]);
    expect(w.busy(), 'after a small round again').to.equal(false);
  });

  /**
   * Two store rounds at once: `first` held at its first `method` on `collection`, `second` started
   * beside it. What the second round answered within 2 s ('waiting' if nothing yet), then, the
   * hold released, what each answered.
   */
  async function twoRoundsOneHeld(collection: string, method: 'bulkWrite' | 'insertMany', first: SequencedWrite[], second: SequencedWrite[], historyMax?: number) {
    const g = gate();
    const c = new MongoClient(sharedServices().mongoUrl, { ...mongoClientOptions(), retryWrites: false });
    clients.push(c);
    const w = createFeedbackWriter({ db: holdingCall(c.db(db.databaseName), collection, method, 1, g.onHeld, g.released), logger: silentLogger, ...(historyMax === undefined ? {} : { historyMax }) });
    const a = w.write(first);
    await g.held;
    const b = w.write(second);
    const early = await Promise.race([b.then((r) => r[0]!.kind), new Promise<'waiting'>((resolve) => setTimeout(() => resolve('waiting'), 2_000))]);
    g.release();
    return { early, first: (await a)[0]!.kind, second: (await b)[0]!.kind };
  }

  it('two rounds at once: a response whose record is being stored by the other round waits for it and is stored, not deferred to a retry', async () => {
    // The first round's record insert is held; the second round (the writer runs two at once) holds the record's response.
    // Without the second look, the second round answers `deferred` at once, the record not being stored yet.
    const r = await twoRoundsOneHeld(COLLECTIONS.records, 'insertMany', [recordWrite(1)], [version(1, 1, 1)]);
    expect(r.early, 'the second round decided before the first stored its record').to.equal('waiting');
    expect(r.first).to.equal('stored');
    expect(r.second).to.equal('stored');
    expect(await stored().countDocuments({ _id: 'rsp_1_1' })).to.equal(1);
  });

  it('two rounds at once: versions of a response in consecutive rounds are stored in order, so the history keeps the earlier one', async () => {
    await (await newWriter()).write([recordWrite(1)]);
    // The first round's response update is held; the second round holds the next version of the same response.
    // Written at once, the second version is stored first and the first one loses as stale, leaving no history.
    const r = await twoRoundsOneHeld(COLLECTIONS.responses, 'bulkWrite', [version(1, 1, 1)], [version(1, 1, 2)], 20);
    expect(r.early, 'the second round wrote before the first').to.equal('waiting');
    expect(r.first).to.equal('stored');
    expect(r.second).to.equal('stored');
    const doc = await db.collection<ResponseDoc>(COLLECTIONS.responses).findOne({ _id: 'rsp_1_1' });
    expect(doc?.seq).to.equal(version(1, 1, 2).seq);
    expect(earlierVersions(doc!).map((h) => h.seq)).to.deep.equal([version(1, 1, 1).seq]);
  });

  it('keeps the newest version of each response whatever order and batches the versions arrive in, and says stale for the others', async () => {
    const w = await newWriter();
    const recs = [1, 2, 3].map(recordWrite);
    expect((await w.write(recs)).map((r) => r.kind)).to.deep.equal(['stored', 'stored', 'stored']);
    const all = [1, 2, 3].flatMap((r) => [1, 2].flatMap((u) => Array.from({ length: 8 }, (_, v) => version(r, u, v + 1))));
    const seed = 20261123;
    const order = shuffled(all, seed);
    const results: WriteResult[] = [];
    // Uneven batches: some hold several versions of one response, some one.
    for (let i = 0; i < order.length; i += 5) results.push(...(await w.write(order.slice(i, i + 5))));
    for (const r of [1, 2, 3]) {
      for (const u of [1, 2]) {
        const doc = await stored().findOne({ _id: `rsp_${r}_${u}` });
        expect(doc?.values, `seed ${seed}: rsp_${r}_${u}`).to.deep.equal({ v: 8 });
        expect(doc?.seq).to.equal(version(r, u, 8).seq);
      }
    }
    expect(results.filter((r) => r.kind === 'stored').length + results.filter((r) => r.kind === 'stale').length).to.equal(all.length);
    expect(results.some((r) => r.kind === 'stale'), 'some versions arrived after a later one').to.equal(true);
  });

  // MongoDB's $set replaces a document value whole, also when only its keys differ.
  it('a newer version whose values are the same values under other keys replaces the stored ones ({"i": 1} -> {"x": 1})', async () => {
    const w = await newWriter();
    await w.write([recordWrite(1)]);
    expect((await w.write([version(1, 1, 1, { i: 1 })])).map((r) => r.kind)).to.deep.equal(['stored']);
    expect((await w.write([version(1, 1, 2, { x: 1 })])).map((r) => r.kind)).to.deep.equal(['stored']);
    const doc = await stored().findOne({ _id: 'rsp_1_1' });
    expect(doc?.values).to.deep.equal({ x: 1 });
    expect(doc?.seq).to.equal(version(1, 1, 2).seq);
  });

  it('a newer version the store refuses for good does not erase an older valid one of the same batch', async () => {
    const w = await newWriter();
    await w.write([recordWrite(1)]);
    const older = version(1, 1, 1, { ok: 'older' });
    // Larger than the store's 16 MiB document limit: refused for good.
    const newer = version(1, 1, 2, { text: OVERSIZE_TEXT });
    const results = await w.write([older, newer]);
    expect(results.map((r) => r.kind)).to.deep.equal(['stored', 'rejected']);
    expect((await stored().findOne({ _id: 'rsp_1_1' }))?.values).to.deep.equal({ ok: 'older' });
  });

  it('a stored response keeps its values when a later update of it is refused for good (no clearing first)', async () => {
    const w = await newWriter();
    await w.write([recordWrite(2)]);
    expect((await w.write([version(2, 1, 1, { ok: 'stored' })])).map((r) => r.kind)).to.deep.equal(['stored']);
    expect((await w.write([version(2, 1, 2, { text: OVERSIZE_TEXT })])).map((r) => r.kind)).to.deep.equal(['rejected']);
    const doc = await stored().findOne({ _id: 'rsp_2_1' });
    expect(doc?.values).to.deep.equal({ ok: 'stored' });
    expect(doc?.seq).to.equal(version(2, 1, 1).seq);
  });

  it('a record over the document limit is refused alone: the others of its round are stored by the same one insert command', async () => {
    const commands: string[] = [];
    const w = await newWriter({ monitor: (e) => void (e.commandName === 'insert' && commands.push(`${String(e.command['insert'])}:${(e.command['documents'] as unknown[]).length}`)) });
    const good = [31, 32, 33, 34].map(recordWrite);
    const poisoned = recordWrite(35);
    if (poisoned.write.kind === 'record') poisoned.write.record.field_to_value = { q: OVERSIZE_TEXT };
    const results = await w.write([good[0]!, good[1]!, poisoned, good[2]!, good[3]!]);
    expect(results.map((r) => r.kind)).to.deep.equal(['stored', 'stored', 'rejected', 'stored', 'stored']);
    expect((results[2] as { error: string }).error).to.match(/larger than the store's limit/);
    // One insert of the four records and one of their first responses: nothing one at a time, nothing of 16 MiB sent.
    expect(commands.sort()).to.deep.equal([`${COLLECTIONS.records}:4`, `${COLLECTIONS.responses}:4`].sort());
    expect(await db.collection(COLLECTIONS.records).countDocuments({})).to.equal(4);
  });

  it('an update over the document limit is refused alone: the other updates of its round are applied by the same one update command', async () => {
    const w = await newWriter();
    await w.write([36, 37, 38, 39].map(recordWrite));
    const commands: number[] = [];
    const w2 = await newWriter({ monitor: (e) => void (e.commandName === 'update' && String(e.command['update']) === COLLECTIONS.responses && commands.push((e.command['updates'] as unknown[]).length)) });
    const results = await w2.write([version(36, 1, 1, { ok: 36 }), version(37, 1, 1, { text: OVERSIZE_TEXT }), version(38, 1, 1, { ok: 38 }), version(39, 1, 1, { ok: 39 })]);
    expect(results.map((r) => r.kind)).to.deep.equal(['stored', 'rejected', 'stored', 'stored']);
    expect((results[1] as { error: string }).error).to.match(/larger than the store's limit/);
    // One command of the three that fit; nothing one at a time, nothing of 16 MiB sent.
    expect(commands).to.deep.equal([3]);
    expect((await stored().findOne({ _id: 'rsp_38_1' }))?.values).to.deep.equal({ ok: 38 });
  });

  it('writers updating the same responses in opposite orders at once do not deadlock (each command takes its documents in _id order); nothing is refused, the newest is stored', async function () {
    this.timeout(120_000);
    const R = 40;
    const WRITERS = 4;
    const ROUNDS = 4;
    const deadlocks: string[] = [];
    const writers: FeedbackWriter[] = [];
    for (let i = 0; i < WRITERS; i++) {
      const c = new MongoClient(sharedServices().mongoUrl, { ...mongoClientOptions(), monitorCommands: true, retryWrites: false });
      c.on('commandSucceeded', (e) => {
        const errors = (e.reply as { writeErrors?: { code: number; errmsg: string }[] }).writeErrors ?? [];
        for (const x of errors) if (x.code === sqlStateCode('40P01')) deadlocks.push(x.errmsg);
      });
      c.on('commandFailed', (e) => void (String(e.failure.message).includes('deadlock') && deadlocks.push(e.failure.message)));
      clients.push(c);
      // History on: its pipeline updates hold their locks longest (where the deadlocks showed: 29 in one round of this test unsorted).
      writers.push(createFeedbackWriter({ db: c.db(db.databaseName), logger: silentLogger, historyMax: 20 }));
    }
    await writers[0]!.write(Array.from({ length: R }, (_, r) => recordWrite(r + 1)));
    const kinds = new Map<string, number>();
    let top = 0;
    for (let round = 0; round < ROUNDS; round++) {
      await Promise.all(
        writers.map(async (w, i) => {
          const v = round * WRITERS + i + 1;
          top = Math.max(top, v);
          const batch = Array.from({ length: R }, (_, r) => version(r + 1, 1, v));
          if (i % 2 === 1) batch.reverse();
          // As the queue does: a round that met an outage (TransientStoreError) runs again.
          for (let attempt = 0; ; attempt++) {
            try {
              for (const r of await w.write(batch)) kinds.set(r.kind, (kinds.get(r.kind) ?? 0) + 1);
              return;
            } catch (err) {
              if (!(err instanceof TransientStoreError) || attempt >= 20) throw err;
            }
          }
        }),
      );
    }
    expect(deadlocks, 'update commands aborted for a deadlock').to.deep.equal([]);
    expect(kinds.get('rejected') ?? 0, `outcomes ${JSON.stringify([...kinds])}`).to.equal(0);
    const docs = await stored().find({ _id: { $in: Array.from({ length: R }, (_, r) => `rsp_${r + 1}_1`) } }).toArray();
    expect(docs.filter((d) => d.seq !== version(Number(d._id.split('_')[1]), 1, top).seq).map((d) => d._id)).to.deep.equal([]);
  });

  it('a job run twice, and two writers running the same job at once, store what one run stores', async () => {
    const [a, b] = [await newWriter(), await newWriter()];
    const job = [recordWrite(7), version(7, 1, 1), version(7, 1, 2), version(7, 2, 1)];
    await Promise.all([a.write(job), b.write(job)]);
    await a.write(job);
    expect(await db.collection(COLLECTIONS.records).countDocuments({ _id: 'rec_writer_test_0007' as never })).to.equal(1);
    const docs = await stored().find({ _id: { $in: ['rsp_7_1', 'rsp_7_2', 'rsp_first_7'] } }).sort({ _id: 1 }).toArray();
    expect(docs.map((d) => [d._id, d.values])).to.deep.equal([['rsp_7_1', { v: 2 }], ['rsp_7_2', { v: 1 }], ['rsp_first_7', { first: 7 }]]);
  });

  it('a response whose record is not stored is deferred, not stored without its record', async () => {
    const w = await newWriter();
    expect((await w.write([version(9, 1, 1)])).map((r) => r.kind)).to.deep.equal(['deferred']);
    expect(await stored().countDocuments({})).to.equal(0);
    await w.write([recordWrite(9)]);
    expect((await w.write([version(9, 1, 1)])).map((r) => r.kind)).to.deep.equal(['stored']);
  });

  it('a store round takes a constant number of commands, however many writes it holds', async function () {
    this.timeout(60_000);
    const counts: number[] = [];
    let n = 0;
    const loader = await newWriter();
    // A second writer that has not seen the records: it must look them up (one $in query).
    const w = await newWriter({ monitor: (e) => void (['insert', 'update', 'find', 'delete'].includes(e.commandName) && n++) });
    for (const size of [5, 60]) {
      const base = size * 10;
      const recs = Array.from({ length: size }, (_, i) => recordWrite(base + i));
      await loader.write(recs);
      n = 0;
      await w.write(recs.flatMap((_, i) => [version(base + i, 1, 1), version(base + i, 2, 1)]));
      counts.push(n);
    }
    expect(counts[0]).to.equal(counts[1]);
    // The record lookup and one update command.
    expect(counts[1]).to.equal(2);
  });
});


describe('worker writer while the store goes away (a private store, FerretDB stopped mid-write)', () => {
  it('every write reported stored is stored: a bulk error without per-document errors is not "all inserted"', async function () {
    this.timeout(60_000);
    const server = await startFerretDb();
    const c = new MongoClient(server.url, { ...mongoClientOptions(), serverSelectionTimeoutMS: 1500, connectTimeoutMS: 1500 });
    const w = createFeedbackWriter({ db: c.db('gone'), logger: silentLogger });
    try {
      await ensureIndexes(c.db('gone'));
      const acknowledged: string[] = [];
      let n = 0;
      let failures = 0;
      let stop = false;
      // Eight callers writing records back to back, as the jobs of one worker do.
      const loops = Array.from({ length: 8 }, async () => {
        while (!stop) {
          const items = [recordWrite(10_000 + n++), recordWrite(10_000 + n++)];
          try {
            await w.write(items);
            acknowledged.push(...items.map((i) => i.write.record_id));
          } catch {
            failures++;
            await new Promise((r) => setTimeout(r, 50));
          }
        }
      });
      await eventually(async () => (acknowledged.length >= 200 ? true : undefined), 20_000, 'writes before the stop');
      await server.stop();
      // Writes keep coming while it is down: each caller fails a few times (connection refused).
      await eventually(async () => (failures >= 24 ? true : undefined), 20_000, 'writes failing while the store is down');
      await server.start();
      const after = acknowledged.length;
      await eventually(async () => (acknowledged.length > after + 50 ? true : undefined), 20_000, 'writes after the restart');
      stop = true;
      await Promise.all(loops);
      const stored = new Set((await c.db('gone').collection(COLLECTIONS.records).find({}, { projection: { _id: 1 } }).toArray()).map((d) => String(d['_id'])));
      expect(acknowledged.filter((id) => !stored.has(id))).to.deep.equal([]);
    } finally {
      await c.close();
      await server.destroy();
    }
  });
});
