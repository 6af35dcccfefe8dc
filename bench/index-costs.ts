// What the worker's indexes cost the stand-in per stored document, and why seeds of millions with
// them never finished (docs/performance.md, "Why the index builds never finished"). For each
// variant, on a fresh store: DocumentDB's index terms (one per field, its default, or one per
// document, `documentdb.defaultUseCompositeOpClass`), `record_user_unique` unique or not, and the
// indexes created before the seed (as the worker does) or built over the seeded collections; then
// seeds --records records (3 annotators, 1–3 responses each, batches of 1,000, 4 in flight) and
// reports seconds and store CPU (PostgreSQL + FerretDB, from /proc) per document.
//
//   node --import tsx bench/index-costs.ts [--records N (20000)] [--variants a,b,…]
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { MongoClient, type Db } from 'mongodb';
import { startFerretDb } from '../devkit/servers.js';
import type { RecordDoc, ResponseDoc } from '../shared/documents.js';
import { COLLECTIONS } from '../shared/mongo.js';
import { storeCpuSeconds } from './lib/proc-cpu.js';
import { ROOT } from './lib/root.js';
import { createSeedIndexes } from './lib/seed-indexes.js';

const argv = process.argv.slice(2);
const opt = (name: string): string | undefined => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : undefined);
const RECORDS = Number(opt('--records') ?? 20_000);
if (!Number.isInteger(RECORDS) || RECORDS <= 0) throw new Error('--records needs a positive whole number');
const BATCH = 1_000;
const IN_FLIGHT = 4;
const DATASETS = Math.max(1, Math.floor(RECORDS / 1_000));
const ANNOTATORS = ['annotator-a', 'annotator-b', 'annotator-c'];

interface Variant {
  readonly name: string;
  /** documentdb.defaultUseCompositeOpClass */
  readonly composite: boolean;
  /** documentdb.enableCompositeUniqueIndex (DocumentDB's default: on): off keeps unique indexes' terms per field. */
  readonly compositeUnique: boolean;
  readonly unique: boolean;
  readonly after: boolean;
}
const ALL: readonly Variant[] = [
  { name: 'terms-per-field-unique', composite: false, compositeUnique: true, unique: true, after: false },
  { name: 'terms-per-field', composite: false, compositeUnique: true, unique: false, after: false },
  { name: 'composite-unique-per-field', composite: true, compositeUnique: false, unique: true, after: false },
  { name: 'composite-unique', composite: true, compositeUnique: true, unique: true, after: false },
  { name: 'composite', composite: true, compositeUnique: true, unique: false, after: false },
  { name: 'composite-unique-per-field-after', composite: true, compositeUnique: false, unique: true, after: true },
  { name: 'composite-after', composite: true, compositeUnique: true, unique: false, after: true },
];
const chosen = opt('--variants')?.split(',');
const VARIANTS = chosen === undefined ? ALL : ALL.filter((v) => chosen.includes(v.name));

const log = (line: string) => process.stdout.write(`${new Date().toISOString().slice(11, 19)} ${line}\n`);

function batch(from: number, to: number): { records: RecordDoc[]; responses: ResponseDoc[] } {
  const records: RecordDoc[] = [];
  const responses: ResponseDoc[] = [];
  for (let i = from; i < to; i++) {
    const at = new Date(Date.UTC(2026, 0, 1) + i);
    const id = `rec_${i.toString(36).padStart(8, '0')}`;
    const dataset = `ds-${i % DATASETS}`;
    const n = Math.floor(i / DATASETS);
    records.push({ _id: id, feedback_dataset_id: dataset, field_to_value: { prompt: `case ${i}` }, external_id: `conv-${i}`, status: n % 3 === 0 ? 'completed' : 'pending', api_key: 'bench', request_id: `seed-${i}`, created_at: at, updated_at: at });
    for (let j = 0; j <= n % 3; j++) {
      responses.push({ _id: `${id}_${j}`, feedback_record_id: id, feedback_dataset_id: dataset, user_id: ANNOTATORS[j]!, status: (['submitted', 'draft', 'discarded'] as const)[(n + j) % 3]!, values: { x: n % 5 }, seq: i * 4 + j + 1, api_key: 'bench', request_id: `seed-${i}-${j}`, created_at: at, updated_at: at });
    }
  }
  return { records, responses };
}

async function seed(db: Db): Promise<number> {
  const inFlight: Promise<unknown>[] = [];
  let documents = 0;
  for (let from = 0; from < RECORDS; from += BATCH) {
    const b = batch(from, Math.min(RECORDS, from + BATCH));
    documents += b.records.length + b.responses.length;
    const sent = Promise.all([db.collection<RecordDoc>(COLLECTIONS.records).insertMany(b.records, { ordered: false }), db.collection<ResponseDoc>(COLLECTIONS.responses).insertMany(b.responses, { ordered: false })]);
    // Awaited below; a failure while an earlier batch is awaited must not be an unhandled rejection.
    sent.catch(() => undefined);
    inFlight.push(sent);
    if (inFlight.length >= IN_FLIGHT) await inFlight.shift();
  }
  await Promise.all(inFlight);
  return documents;
}

/** A row, or the store's failure (a backend crash reaches the client as `unexpected EOF`). */
async function run(v: Variant): Promise<string> {
  try {
    return await measure(v);
  } catch (err) {
    const row = `| ${v.name} | failed: ${(err as Error).message.split('\n')[0]!.slice(0, 120)} (see the PostgreSQL log) ||||||||`;
    log(row);
    return row;
  }
}

async function measure(v: Variant): Promise<string> {
  const store = await startFerretDb();
  try {
    const port = store.postgres.port;
    const sql = (text: string) => execFileSync('bash', [join(ROOT, 'scripts', 'store.sh'), 'psql', String(port), text], { encoding: 'utf8' }).trim();
    sql(`ALTER SYSTEM SET documentdb.defaultUseCompositeOpClass = ${v.composite ? 'on' : 'off'}`);
    sql(`ALTER SYSTEM SET documentdb.enableCompositeUniqueIndex = ${v.compositeUnique ? 'on' : 'off'}`);
    sql('SELECT pg_reload_conf()');
    // An index build over the seeded collections outlasts the driver's default socket timeout.
    const client = new MongoClient(store.url, { socketTimeoutMS: 0 });
    try {
      const db = client.db('index_costs');
      const timed = async (what: () => Promise<unknown>) => {
        const [t, cpu] = [Date.now(), storeCpuSeconds(port)];
        await what();
        return { seconds: (Date.now() - t) / 1000, cpu: storeCpuSeconds(port) - cpu };
      };
      if (!v.after) await createSeedIndexes(db, { unique: v.unique });
      let documents = 0;
      const seeded = await timed(async () => (documents = await seed(db)));
      const built = v.after ? await timed(() => createSeedIndexes(db, { unique: v.unique })) : undefined;
      const total = { seconds: seeded.seconds + (built?.seconds ?? 0), cpu: seeded.cpu + (built?.cpu ?? 0) };
      const row = `| ${v.name} | ${v.composite ? `one per document${v.unique && !v.compositeUnique ? ' (the unique one: per field)' : ''}` : 'one per field'} | ${v.unique ? 'yes' : 'no'} | ${v.after ? 'built after' : 'in place'} | ${documents.toLocaleString('en-US')} | ${seeded.seconds.toFixed(1)} | ${built === undefined ? '–' : built.seconds.toFixed(1)} | ${Math.round(documents / total.seconds).toLocaleString('en-US')} | ${Math.round((total.cpu * 1e6) / documents)} |`;
      log(row);
      return row;
    } finally {
      await client.close();
    }
  } finally {
    // After a backend crash the cluster may not stop by itself: say so rather than hide the crash behind it.
    await store.destroy().catch((err: unknown) => log(`${v.name}: the store did not stop (${(err as Error).message.split('\n')[0]!}): stop its postmaster (kill -QUIT) and remove its directory by hand`));
  }
}

const rows: string[] = [];
const load0 = loadavg();
for (const v of VARIANTS) rows.push(await run(v));
const stamp = new Date().toISOString().replace(/:/g, '-').replace(/\.\d+Z$/, 'Z');
const report = [
  `# Index costs on the stand-in (bench/index-costs.ts), ${stamp}`,
  '',
  `Command: \`node --import tsx bench/index-costs.ts ${argv.join(' ')}\`; ${cpus().length} CPUs, load average ${load0.map((l) => l.toFixed(2)).join(' / ')} at the start, ${loadavg().map((l) => l.toFixed(2)).join(' / ')} at the end (1/5/15 min).`,
  `${RECORDS.toLocaleString('en-US')} records in ${DATASETS} datasets and 1–3 responses each by 3 annotators, inserted in batches of ${BATCH} records, ${IN_FLIGHT} in flight, into the worker's indexes (worker/indexes.ts) on a fresh store per row. Store CPU: PostgreSQL + FerretDB from /proc, seed and build, per document.`,
  '',
  '| variant | index terms | record_user_unique unique | indexes | documents | seed s | build s | documents/s | store CPU µs per document |',
  '|---|---|---|---|---|---|---|---|---|',
  ...rows,
  '',
].join('\n');
const dir = join(ROOT, 'bench', 'results');
mkdirSync(dir, { recursive: true });
const file = join(dir, `index-costs-${stamp}.md`);
writeFileSync(file, report);
process.stdout.write(`\n${report}\nreport: ${file}\n`);
