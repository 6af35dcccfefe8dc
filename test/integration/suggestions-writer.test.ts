import { expect } from 'chai';
import { MongoClient, type Db } from 'mongodb';
import type { SuggestionDoc } from '../../shared/documents.js';
import { COLLECTIONS, mongoClientOptions } from '../../shared/mongo.js';
import type { RecordWrite } from '../../shared/writes.js';
import type { SequencedWrite } from '../../worker/documents.js';
import { ensureIndexes } from '../../worker/indexes.js';
import type { SuggestionChange } from '../../worker/suggestions.js';
import { createFeedbackWriter, type FeedbackWriter } from '../../worker/writer.js';
import { uniqueName } from '../helpers/env.js';
import { OVERSIZE_TEXT } from '../helpers/oversize.js';
import { sharedServices } from '../helpers/root-hooks.js';
import { silentLogger } from '../helpers/stack.js';
import { recordWrite, shuffled, suggestionVersion } from '../helpers/writes.js';

/** Record `n` carrying `suggestions` (stored with the record's order). */
function recordWithSuggestions(n: number, suggestions: RecordWrite['suggestions']): SequencedWrite {
  const item = recordWrite(n);
  return { ...item, write: { ...(item.write as RecordWrite), ...(suggestions === undefined ? {} : { suggestions }) } };
}

describe('worker writer: suggestions (feedback_suggestions) on the real store', () => {
  let client: MongoClient;
  let db: Db;
  const clients: MongoClient[] = [];
  let changes: SuggestionChange[] = [];

  async function newWriter(): Promise<FeedbackWriter> {
    const c = new MongoClient(sharedServices().mongoUrl, { ...mongoClientOptions(), retryWrites: false });
    clients.push(c);
    return createFeedbackWriter({ db: c.db(db.databaseName), logger: silentLogger, onSuggestionsStored: (list) => changes.push(...list) });
  }
  const stored = () => db.collection<SuggestionDoc>(COLLECTIONS.suggestions);

  beforeEach(async () => {
    changes = [];
    client = new MongoClient(sharedServices().mongoUrl, { ...mongoClientOptions(), retryWrites: false });
    db = client.db(uniqueName('suggestions').replace(/-/g, '_'));
    await ensureIndexes(db);
  });
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close()));
    await db.dropDatabase().catch(() => undefined);
    await client.close();
  });

  it('an earlier-accepted suggestion never overwrites a later one, whatever order and rounds the versions arrive in', async () => {
    const w = await newWriter();
    await w.write([1, 2].map(recordWrite));
    const all = [1, 2].flatMap((r) => ['label', 'rating'].flatMap((q) => Array.from({ length: 6 }, (_, v) => suggestionVersion(r, q, 'model-a', v + 1))));
    const seed = 20261125;
    const order = shuffled(all, seed);
    const kinds: string[] = [];
    for (let i = 0; i < order.length; i += 4) kinds.push(...(await w.write(order.slice(i, i + 4))).map((r) => r.kind));
    for (const r of [1, 2]) {
      for (const q of ['label', 'rating']) {
        const doc = await stored().findOne({ _id: `sug_${r}_${q}_model-a` });
        expect(doc?.value, `seed ${seed}: sug_${r}_${q}`).to.equal('v6');
        expect(doc?.seq).to.equal(suggestionVersion(r, q, 'model-a', 6).seq);
      }
    }
    expect(kinds.every((k) => k === 'stored' || k === 'stale')).to.equal(true);
    expect(kinds.includes('stale'), 'some versions arrived after a later one').to.equal(true);
  });

  it('a later version stored first makes the earlier one stale (its value, score and order stay)', async () => {
    const w = await newWriter();
    await w.write([recordWrite(3)]);
    expect((await w.write([suggestionVersion(3, 'label', 'm', 2, 'yes', 0.9)])).map((r) => r.kind)).to.deep.equal(['stored']);
    expect((await w.write([suggestionVersion(3, 'label', 'm', 1, 'no', 0.1)])).map((r) => r.kind)).to.deep.equal(['stale']);
    const doc = await stored().findOne({ _id: 'sug_3_label_m' });
    expect(doc).to.include({ value: 'yes', score: 0.9, seq: suggestionVersion(3, 'label', 'm', 2).seq, question: 'label', agent: 'm', feedback_record_id: 'rec_writer_test_0003', feedback_dataset_id: 'ds_writer' });
    expect(changes.map((c) => c.value)).to.deep.equal(['yes']);
  });

  it('a later version without a score does not keep the score of the one it replaces', async () => {
    const w = await newWriter();
    await w.write([recordWrite(4)]);
    await w.write([suggestionVersion(4, 'label', 'm', 1, 'no', 0.4)]);
    await w.write([suggestionVersion(4, 'label', 'm', 2, 'yes')]);
    const doc = await stored().findOne({ _id: 'sug_4_label_m' });
    expect(doc?.value).to.equal('yes');
    expect(doc).to.not.have.property('score');
  });

  it('a job run twice, and two writers running the same job at once, store what one run stores', async () => {
    const [a, b] = [await newWriter(), await newWriter()];
    await a.write([recordWrite(5)]);
    const job = [suggestionVersion(5, 'label', 'm', 1), suggestionVersion(5, 'label', 'm', 2), suggestionVersion(5, 'label', 'other', 1)];
    await Promise.all([a.write(job), b.write(job)]);
    expect((await a.write(job)).map((r) => r.kind)).to.deep.equal(['stale', 'stored', 'stored']);
    const docs = await stored().find({}).sort({ _id: 1 }).toArray();
    expect(docs.map((d) => [d._id, d.value])).to.deep.equal([['sug_5_label_m', 'v2'], ['sug_5_label_other', 'v1']]);
  });

  it('a suggestion whose record is not stored is deferred, not stored without its record', async () => {
    const w = await newWriter();
    expect((await w.write([suggestionVersion(6, 'label', 'm', 1)])).map((r) => r.kind)).to.deep.equal(['deferred']);
    expect(await stored().countDocuments({})).to.equal(0);
    await w.write([recordWrite(6)]);
    expect((await w.write([suggestionVersion(6, 'label', 'm', 1)])).map((r) => r.kind)).to.deep.equal(['stored']);
  });

  it('a newer version the store refuses for good is rejected and the older one of the round is kept', async () => {
    const w = await newWriter();
    await w.write([recordWrite(7)]);
    const results = await w.write([suggestionVersion(7, 'label', 'm', 1, 'ok'), suggestionVersion(7, 'label', 'm', 2, OVERSIZE_TEXT)]);
    expect(results.map((r) => r.kind)).to.deep.equal(['stored', 'rejected']);
    expect((await stored().findOne({ _id: 'sug_7_label_m' }))?.value).to.equal('ok');
  });

  it("a record's suggestions are stored with it, in its order: the later of two for the same (question, agent) in its list wins, and a later suggestion write replaces them", async () => {
    const w = await newWriter();
    const rec = recordWithSuggestions(8, [
      { suggestion_id: 'sug_8_label_m', question: 'label', value: 'first', agent: 'm' },
      { suggestion_id: 'sug_8_rating_m', question: 'rating', value: 3, score: 0.5, agent: 'm' },
      { suggestion_id: 'sug_8_label_m', question: 'label', value: 'second', agent: 'm' },
    ]);
    expect((await w.write([rec])).map((r) => r.kind)).to.deep.equal(['stored']);
    // Run again (a job run twice): nothing changes.
    expect((await w.write([rec])).map((r) => r.kind)).to.deep.equal(['stored']);
    const docs = await stored().find({}).sort({ _id: 1 }).toArray();
    expect(docs.map((d) => [d._id, d.value, d.seq])).to.deep.equal([['sug_8_label_m', 'second', rec.seq], ['sug_8_rating_m', 3, rec.seq]]);
    const later = suggestionVersion(8, 'label', 'm', 1, 'third');
    expect(later.seq).to.be.greaterThan(rec.seq);
    expect((await w.write([later])).map((r) => r.kind)).to.deep.equal(['stored']);
    expect((await stored().findOne({ _id: 'sug_8_label_m' }))?.value).to.equal('third');
    // And the record write coming again after it (a re-run) does not bring its older suggestion back.
    await w.write([rec]);
    expect((await stored().findOne({ _id: 'sug_8_label_m' }))?.value).to.equal('third');
  });
});
