// What the MongoDB stand-in (FerretDB v2 on PostgreSQL + DocumentDB, the store of npm start)
// costs per operation as a collection grows:
//
//   npx tsx bench/store-costs.ts [--sizes 10000,200000] [--million] [--samples 15] [--min-samples 3] [--budget-s 20]
//
// The store is seeded with response-like documents in insertMany batches of 500 up to each size
// in turn; at each size it times findOne({_id}), a conditional upsert updateOne({_id, seq: {$lt}}),
// a bulkWrite of 40 such upserts (ordered: false) and find({_id: {$in: 20 ids}}), every command
// after the previous one.
import { parseArgs } from 'node:util';
import { BSON, MongoClient, type AnyBulkWriteOperation, type Collection } from 'mongodb';
import { COLLECTIONS, mongoClientOptions } from '../shared/mongo.js';
import { startFerretDb, type ManagedServer } from '../devkit/servers.js';

type Store = 'documentdb';

interface ResponseDoc {
  _id: string;
  feedback_record_id: string;
  feedback_dataset_id: string;
  user_id: string;
  status: string;
  values: Record<string, string | number>;
  seq: number;
  api_key: string;
  request_id: string;
  created_at: Date;
  updated_at: Date;
}

interface Row {
  store: Store;
  size: number;
  seedSeconds: number;
  insertDocsPerSecond: number;
  findOneMs: number;
  updateOneMs: number;
  bulk40Ms: number;
  findIn20Ms: number;
  samples: string;
}

const BATCH = 500;
const BULK_OPS = 40;
const IN_IDS = 20;
const DATABASE = 'store_costs';

const HELP = `usage: npx tsx bench/store-costs.ts [--sizes 10000,200000] [--million] 
                                    [--samples 15] [--min-samples 3] [--budget-s 20]
  --sizes        collection sizes to measure at, ascending (documents)          default 10000,200000
  --million      also measure at 1,000,000 documents
  --samples      timed runs per operation at most                               default 15
  --min-samples  timed runs per operation at least, whatever the budget         default 3
  --budget-s     seconds per operation after which sampling stops (min-samples kept)  default 20`;

function options() {
  const { values } = parseArgs({
    options: {
      sizes: { type: 'string', default: '10000,200000' },
      million: { type: 'boolean', default: false },
      samples: { type: 'string', default: '15' },
      'min-samples': { type: 'string', default: '3' },
      'budget-s': { type: 'string', default: '20' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    console.log(HELP);
    process.exit(0);
  }
  const sizes = values.sizes.split(',').map((s) => Number(s.replaceAll('_', '')));
  if (values.million) sizes.push(1_000_000);
  if (sizes.some((n) => !Number.isInteger(n) || n < IN_IDS)) throw new Error(`--sizes: whole numbers of at least ${IN_IDS}`);
  const stores: Store[] = ['documentdb'];
  return {
    sizes: [...new Set(sizes)].sort((a, b) => a - b),
    stores,
    samples: Number(values.samples),
    minSamples: Number(values['min-samples']),
    budgetMs: Number(values['budget-s']) * 1000,
  };
}

const idOf = (i: number) => `rsp_${i.toString(36).padStart(8, '0')}_Qx7bR2kLmN4pT9`;
const COMMENT = 'The answer was mostly right but it missed the second part of the question; it also cited an old policy. '.repeat(2).slice(0, 161);

function responseDoc(i: number): ResponseDoc {
  const at = new Date(1_760_000_000_000 + i * 1000);
  return {
    _id: idOf(i),
    feedback_record_id: `rec_${i.toString(36).padStart(8, '0')}AaIJvDyyZEZj29BgE_0l2g`,
    feedback_dataset_id: `ds_support_bot_${i % 50}`,
    user_id: `user_${i % 997}`,
    status: 'submitted',
    values: { helpfulness: i % 5, correctness: (i * 7) % 5, tone: 'neutral', comment: COMMENT },
    seq: 1,
    api_key: 'bench',
    request_id: `41d2308e-515a-48de-935a-${i.toString(16).padStart(12, '0')}`,
    created_at: at,
    updated_at: at,
  };
}

const median = (xs: readonly number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
};

const progress = (line: string) => process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${line}\n`);

/** The store of npm start. */
async function startStore(_store: Store): Promise<ManagedServer> {
  return startFerretDb();
}

async function main(): Promise<void> {
  const opts = options();
  const rows: Row[] = [];
  // Random but reproducible picks of existing documents.
  let state = 12345;
  const pick = (n: number) => {
    state = (state * 1103515245 + 12345) % 2 ** 31;
    return state % n;
  };
  let seq = 2;

  /** Runs `op` at most `samples` times, stopping after `budgetMs` once `minSamples` ran; median ms. */
  async function time(label: string, op: () => Promise<void>, warmUp: boolean): Promise<{ ms: number; n: number }> {
    if (warmUp) await op();
    const times: number[] = [];
    const start = performance.now();
    while (times.length < opts.samples && (times.length < opts.minSamples || performance.now() - start < opts.budgetMs)) {
      const t = performance.now();
      await op();
      times.push(performance.now() - t);
    }
    progress(`  ${label}: median ${median(times).toFixed(1)} ms of ${times.length}`);
    return { ms: median(times), n: times.length };
  }

  // Ctrl-C stops the servers too: a spawned FerretDB outlives its parent.
  let current: ManagedServer | undefined;
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      progress(`${signal}: stopping`);
      void (current?.destroy() ?? Promise.resolve()).finally(() => process.exit(130));
    });
  }

  for (const store of opts.stores) {
    progress(`${store}: starting FerretDB v2 on a private PostgreSQL with DocumentDB`);
    const server = await startStore(store);
    current = server;
    const client = new MongoClient(server.url, { ...mongoClientOptions(), serverSelectionTimeoutMS: 10_000, retryWrites: false });
    try {
      const responses: Collection<ResponseDoc> = client.db(DATABASE).collection<ResponseDoc>(COLLECTIONS.responses);
      progress(`${store}: one document is ${BSON.calculateObjectSize(responseDoc(0))} bytes of BSON`);
      let seeded = 0;
      let seedMs = 0;
      for (const size of opts.sizes) {
        const t0 = performance.now();
        for (let i = seeded; i < size; i += BATCH) {
          const docs = [];
          for (let j = i; j < Math.min(size, i + BATCH); j++) docs.push(responseDoc(j));
          await responses.insertMany(docs, { ordered: false });
        }
        const increment = performance.now() - t0;
        const inserted = size - seeded;
        seedMs += increment;
        seeded = size;
        progress(`${store}: seeded ${size} documents (${(inserted / (increment / 1000)).toFixed(0)} docs/s for the last ${inserted})`);

        const findOne = await time('findOne({_id})', async () => {
          const id = idOf(pick(size));
          const doc = await responses.findOne({ _id: id });
          if (doc?._id !== id) throw new Error(`findOne(${id}) returned ${doc?._id ?? 'null'}`);
        }, true);
        const updateOne = await time('updateOne({_id, seq: {$lt}}, upsert)', async () => {
          const s = seq++;
          const res = await responses.updateOne({ _id: idOf(pick(size)), seq: { $lt: s } }, { $set: { seq: s, updated_at: new Date() } }, { upsert: true });
          if (res.matchedCount !== 1) throw new Error(`conditional upsert matched ${res.matchedCount}`);
        }, true);
        const bulk40 = await time(`bulkWrite of ${BULK_OPS} conditional upserts`, async () => {
          const s = seq++;
          const ids = new Set<string>();
          while (ids.size < BULK_OPS) ids.add(idOf(pick(size)));
          const ops: AnyBulkWriteOperation<ResponseDoc>[] = [...ids].map((_id) => ({
            updateOne: { filter: { _id, seq: { $lt: s } }, update: { $set: { seq: s, updated_at: new Date() } }, upsert: true },
          }));
          const res = await responses.bulkWrite(ops, { ordered: false });
          if (res.matchedCount !== BULK_OPS) throw new Error(`bulk of ${BULK_OPS} conditional upserts matched ${res.matchedCount}`);
        }, false);
        const findIn = await time(`find({_id: {$in: ${IN_IDS} ids}})`, async () => {
          const ids = new Set<string>();
          while (ids.size < IN_IDS) ids.add(idOf(pick(size)));
          const docs = await responses.find({ _id: { $in: [...ids] } }).toArray();
          if (docs.length !== IN_IDS) throw new Error(`$in of ${IN_IDS} ids found ${docs.length}`);
        }, true);
        const row: Row = {
          store,
          size,
          seedSeconds: seedMs / 1000,
          insertDocsPerSecond: inserted / (increment / 1000),
          findOneMs: findOne.ms,
          updateOneMs: updateOne.ms,
          bulk40Ms: bulk40.ms,
          findIn20Ms: findIn.ms,
          samples: [findOne.n, updateOne.n, bulk40.n, findIn.n].join('/'),
        };
        rows.push(row);
        progress(`${store} @ ${size}: ${JSON.stringify(row)}`);
      }
    } finally {
      await client.close();
      current = undefined;
      await server.destroy();
    }
  }

  const f = (x: number, digits = 1) => x.toFixed(digits);
  console.log(`| store | documents | seeding (s, total) | insertMany (docs/s) | findOne({_id}) ms | updateOne({_id, seq:{$lt}}, upsert) ms | bulkWrite 40 cond. upserts ms | find({_id:{$in:20}}) ms | samples |`);
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|---|');
  for (const r of rows) {
    const name = 'FerretDB v2/DocumentDB';
    console.log(`| ${name} | ${r.size.toLocaleString('en')} | ${f(r.seedSeconds)} | ${f(r.insertDocsPerSecond, 0)} | ${f(r.findOneMs)} | ${f(r.updateOneMs)} | ${f(r.bulk40Ms)} | ${f(r.findIn20Ms)} | ${r.samples} |`);
  }
  console.log(`\nMedians; samples = timed runs of findOne/updateOne/bulkWrite/$in; documents of ${BSON.calculateObjectSize(responseDoc(0))} B seeded in insertMany batches of ${BATCH}; insertMany docs/s over the last seeding step.`);
}

await main();
