// What each store command of the worker's completion recount (worker/completion.ts) costs the
// store, per record, in commands of 200 records (a store round's): the forms it uses and those it
// replaced. A dataset of `--records` records with one response each, the worker's indexes, the
// store otherwise idle; store CPU from /proc.
//
//   node --import tsx bench/completion-costs.ts [--records N]
import { MongoClient } from 'mongodb';
import { COLLECTIONS } from '../shared/mongo.js';
import { buildSeed, seedDb } from './lib/drain-writes.js';
import { storeCpuSeconds } from './lib/proc-cpu.js';
import { startTestStore } from './lib/services.js';
import { wholeNumberArg } from './lib/args.js';

const argv = process.argv.slice(2);
const RECORDS = wholeNumberArg(argv, '--records', 10_000);
const CHUNK = 200;

const store = await startTestStore();
const client = await MongoClient.connect(store.url);
try {
  const db = client.db('completion_costs');
  const seed = buildSeed(RECORDS * 2);
  await seedDb(db, seed);
  const ids = seed.records.map((r) => r._id);
  type Doc = { _id: string; token?: string };
  const responses = db.collection<Doc & { feedback_record_id: string; status: string; seq: number }>(COLLECTIONS.responses);
  const records = db.collection<Doc & { status: string }>(COLLECTIONS.records);
  const guards = db.collection<Doc>(COLLECTIONS.completionGuards);
  const ONE_BATCH = { batchSize: 100_000 };

  console.log(`${ids.length} records with one response each; commands of ${CHUNK} records, one at a time`);
  console.log('| command | ms per command | store CPU µs per record | client CPU µs per record |');
  console.log('|---|---|---|---|');
  const time = async (name: string, fn: (chunk: string[], i: number) => Promise<unknown>) => {
    const c0 = storeCpuSeconds(store.postgresPort);
    const u0 = process.cpuUsage();
    const t0 = Date.now();
    let n = 0;
    for (let i = 0; i + CHUNK <= ids.length; i += CHUNK) {
      await fn(ids.slice(i, i + CHUNK), i);
      n++;
    }
    const u = process.cpuUsage(u0);
    console.log(`| ${name} | ${((Date.now() - t0) / n).toFixed(1)} | ${(((storeCpuSeconds(store.postgresPort) - c0) * 1e6) / (n * CHUNK)).toFixed(0)} | ${((u.user + u.system) / (n * CHUNK)).toFixed(1)} |`);
  };
  const match = (c: string[]) => ({ feedback_record_id: { $in: c }, status: 'submitted' });
  await time('count: `$group` of the submitted responses (before)', (c) => responses.aggregate([{ $match: match(c) }, { $group: { _id: '$feedback_record_id', n: { $sum: 1 }, last: { $max: '$seq' } } }], ONE_BATCH).toArray());
  await time('count: the submitted responses read, projected (now)', (c) => responses.find(match(c), { projection: { feedback_record_id: 1, seq: 1 }, ...ONE_BATCH }).toArray());
  await time('records read, default first batch (before)', (c) => records.find({ _id: { $in: c } }, { projection: { status: 1, completed_seq: 1 } }).toArray());
  await time('records read, one batch (now)', (c) => records.find({ _id: { $in: c } }, { projection: { status: 1, completed_seq: 1 }, ...ONE_BATCH }).toArray());
  await time('claim: single upserts, guards created', (c) => guards.bulkWrite(c.map((_id) => ({ updateOne: { filter: { _id }, update: { $set: { token: 'a' } }, upsert: true } })), { ordered: false }));
  await time('claim: single upserts, guards there (used)', (c) => guards.bulkWrite(c.map((_id) => ({ updateOne: { filter: { _id }, update: { $set: { token: 'b' } }, upsert: true } })), { ordered: false }));
  await time('claim: one updateMany, guards there (not used: deadlocks, worker/completion.ts)', (c, i) => guards.updateMany({ _id: { $in: c } }, { $set: { token: `m${i}` } }));
  await time('guards read by id (fresh records, before)', (c) => guards.find({ _id: { $in: c } }, { projection: { _id: 1 }, ...ONE_BATCH }).toArray());
  // The worker's own index (sparse, on rseq; worker/indexes.ts), created with the seed.
  await time('guards read by the records\' order range (fresh records, now)', (_c, i) => guards.find({ rseq: { $gte: 1e12 + i, $lte: 1e12 + i + CHUNK } }, { projection: { _id: 1 }, ...ONE_BATCH }).toArray());
  await time('status write (a change only)', (c) => records.bulkWrite(c.map((_id) => ({ updateOne: { filter: { _id }, update: { $set: { status: 'pending' } } } })), { ordered: false }));
  // What a store command costs the worker whatever it reads: on a slow machine it outweighs the documents.
  const perCommand = async (name: string, fn: () => Promise<unknown>) => {
    const u0 = process.cpuUsage();
    const t0 = Date.now();
    for (let i = 0; i < 200; i++) await fn();
    const u = process.cpuUsage(u0);
    console.log(`| ${name} | ${((Date.now() - t0) / 200).toFixed(1)} | – | ${((u.user + u.system) / 200).toFixed(0)} per command |`);
  };
  await perCommand('`ping` (per command)', () => db.command({ ping: 1 }));
  await perCommand('records read of 2 ids (per command)', () => records.find({ _id: { $in: ids.slice(0, 2) } }, { projection: { status: 1 }, ...ONE_BATCH }).toArray());
} finally {
  await client.close();
  await store.stop();
}
