// `npm run bench:reads` (issue 21 item 5, issue 25 §4): do the read API's pages, `updated_since`
// and filters use the store's indexes when the collection is large? Seeds --records records (one
// dataset of --dataset-records among datasets of the same size, created interleaved in time so
// that the measured dataset is spread over the whole collection) and one or more responses per
// record, straight into the store with insertMany in the shapes the worker stores
// (shared/documents.ts), with the worker's indexes created first on the empty collections as the
// worker does at start-up (`--indexes-after`: built over the seeded collections instead;
// `--unique`: `record_user_unique` unique as the worker makes it, see bench/lib/seed-indexes.ts);
// starts the real API process (`api/main.ts`, through tsx) and times
// repeated calls of each query through HTTP (median, p95); then runs `explain` on the store
// queries the API sent for each (captured from an in-process reader with command monitoring)
// and names the indexes the plan uses.
//
//   node --import tsx bench/reads-at-scale.ts [--records N (1000000)] [--dataset-records N (1000)] [--calls N (30)] [--raw-plans] [--indexes-after] [--unique]
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { MongoClient, type CommandStartedEvent, type Db, type Document } from 'mongodb';
import type { RecordDoc, ResponseDoc } from '../shared/documents.js';
import { COLLECTIONS, mongoClientOptions } from '../shared/mongo.js';
import { parseQuery } from '../api/parse-input.js';
import { groupMetadataParams, RecordListQuery, toListing } from '../api/read-query.js';
import { createRecordReader } from '../api/reads.js';
import { ROOT } from './lib/root.js';
import { freePort, startFerretDb, startRedis, waitForPort } from '../devkit/servers.js';
import { STORE_BACKEND } from './lib/services.js';
import { createSeedIndexes } from './lib/seed-indexes.js';
import { storeCpuSeconds } from './lib/proc-cpu.js';
import { treeCpuSeconds } from './lib/procs.js';
import { wholeNumberArg } from './lib/args.js';

const argv = process.argv.slice(2);
const num = (name: string, def: number): number => wholeNumberArg(argv, name, def);
if (argv.includes('--help')) {
  process.stdout.write('usage: npm run bench:reads -- [--records N (1000000)] [--dataset-records N (1000)] [--calls N (30)] [--raw-plans] [--indexes-after] [--unique]\n');
  process.exit(0);
}
const RECORDS = num('--records', 1_000_000);
const DATASET_RECORDS = num('--dataset-records', 1_000);
const CALLS = num('--calls', 30);
/** Also write each plan's raw `explain` answer into the report. */
const RAW_PLANS = argv.includes('--raw-plans');
/** Build the indexes over the seeded collections rather than seed with them in place. */
const INDEXES_AFTER = argv.includes('--indexes-after');
/** Create `record_user_unique` unique (the worker's index exactly): quadratic to seed on the stand-in. */
const UNIQUE = argv.includes('--unique');
const DATASETS = Math.max(1, Math.floor(RECORDS / DATASET_RECORDS));
const SEED_BATCH = 1_000;
/** Seed batches sent at once (FerretDB runs each on its own PostgreSQL backend). */
const SEED_IN_FLIGHT = 4;
const DATASET = 'bench-reads-0';
const DATABASE = 'bench_reads';
const BASE_MS = Date.UTC(2026, 0, 1);
const KEY = { name: 'bench', secret: `bench-${randomBytes(12).toString('hex')}` };
/** Annotators per dataset; record i has responses by the first 1 + i % 3 of them. */
const ANNOTATORS = ['annotator-a', 'annotator-b', 'annotator-c'];
const RESPONSE_STATUSES = ['submitted', 'draft', 'discarded'] as const;

const log = (line: string) => process.stdout.write(`${new Date().toISOString().slice(11, 19)} ${line}\n`);

/** Record i of the collection: dataset i % DATASETS, created at BASE + i ms. */
function docs(from: number, to: number): { records: RecordDoc[]; responses: ResponseDoc[] } {
  const records: RecordDoc[] = [];
  const responses: ResponseDoc[] = [];
  for (let i = from; i < to; i++) {
    const at = new Date(BASE_MS + i);
    const dataset = `bench-reads-${i % DATASETS}`;
    const id = `rec_bench_${i.toString(36).padStart(8, '0')}`;
    const n = Math.floor(i / DATASETS);
    records.push({
      _id: id,
      feedback_dataset_id: dataset,
      field_to_value: { prompt: `How do I reset my password? (case ${i})`, answer: 'Open Settings, then Security, then choose Reset password.' },
      external_id: `conv-${i}`,
      metadata: { model: n % 2 === 0 ? 'model-a' : 'model-b', turn: n % 7, locale: 'en' },
      // What the completion rule writes; `submitted` is what a dataset without one has.
      status: (n % 3 === 0 ? 'completed' : 'pending') as RecordDoc['status'],
      api_key: 'bench',
      request_id: `seed-${i}`,
      created_at: at,
      updated_at: at,
    });
    for (let j = 0; j <= n % 3; j++) {
      responses.push({
        _id: `rsp_bench_${i.toString(36).padStart(8, '0')}_${j}`,
        feedback_record_id: id,
        feedback_dataset_id: dataset,
        user_id: ANNOTATORS[j]!,
        status: RESPONSE_STATUSES[(n + j) % 3]!,
        values: { helpful: (n + j) % 5 },
        seq: i * 4 + j + 1,
        api_key: 'bench',
        request_id: `seed-${i}-${j}`,
        created_at: at,
        updated_at: at,
      });
    }
  }
  return { records, responses };
}

async function seed(db: Db): Promise<{ seconds: number; responses: number }> {
  const started = Date.now();
  const records = db.collection<RecordDoc>(COLLECTIONS.records);
  const responses = db.collection<ResponseDoc>(COLLECTIONS.responses);
  let responseCount = 0;
  const inFlight: Promise<unknown>[] = [];
  for (let from = 0; from < RECORDS; from += SEED_BATCH) {
    const batch = docs(from, Math.min(RECORDS, from + SEED_BATCH));
    responseCount += batch.responses.length;
    inFlight.push(Promise.all([records.insertMany(batch.records, { ordered: false }), responses.insertMany(batch.responses, { ordered: false })]));
    if (inFlight.length >= SEED_IN_FLIGHT) await inFlight.shift();
    if ((from / SEED_BATCH) % 100 === 0) log(`seeded ${Math.min(RECORDS, from + SEED_BATCH).toLocaleString('en-US')} records`);
  }
  await Promise.all(inFlight);
  return { seconds: (Date.now() - started) / 1000, responses: responseCount };
}

async function getJson(port: number, path: string): Promise<{ ms: number; body: Document }> {
  const started = performance.now();
  const res = await fetch(`http://127.0.0.1:${port}${path}`, { headers: { Authorization: `Bearer ${KEY.secret}` } });
  const body = (await res.json()) as Document;
  const ms = performance.now() - started;
  if (res.status !== 200) throw new Error(`${path} answered ${res.status}: ${JSON.stringify(body)}`);
  return { ms, body };
}

function quantile(sorted: readonly number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
}

/** The index names a plan names (PostgreSQL's `Index Name`, MongoDB's `indexName`) and the scan kinds found anywhere in an explain answer. */
function planSummary(explain: Document): string {
  const text = JSON.stringify(explain);
  const indexes = [...new Set([...text.matchAll(/"(?:Index Name|indexName)":"([^"]+)"/g)].map((m) => m[1]!))];
  const scans = [...new Set(text.match(/\b(Seq Scan|Index Scan|Index Only Scan|Bitmap Index Scan|Bitmap Heap Scan|COLLSCAN|IXSCAN|Sort)\b/g) ?? [])];
  return `${indexes.length === 0 ? 'no index' : indexes.join(', ')}${scans.length === 0 ? '' : ` (${scans.join(', ')})`}`;
}

interface Case {
  readonly name: string;
  /** The query string of the first page. */
  readonly query: string;
  /** Time the page after the first (with its cursor) instead of the first. */
  readonly second?: boolean;
}

const SINCE = new Date(BASE_MS + Math.floor(RECORDS * 0.9)).toISOString();
const CASES: readonly Case[] = [
  { name: 'first page, newest first', query: 'limit=50' },
  { name: 'cursor page (2nd), newest first', query: 'limit=50', second: true },
  { name: 'cursor page (2nd), oldest first', query: 'order=oldest&limit=50', second: true },
  { name: 'updated_since (last 10% of the time)', query: `limit=50&updated_since=${SINCE}` },
  { name: 'updated_since, cursor page (2nd)', query: `order=oldest&limit=50&updated_since=${new Date(BASE_MS).toISOString()}`, second: true },
  { name: 'status=pending', query: 'limit=50&status=pending' },
  { name: 'status=completed, cursor page (2nd)', query: 'limit=50&status=completed', second: true },
  { name: 'metadata.model=model-b', query: 'limit=50&metadata.model=model-b' },
  { name: 'metadata.turn=3 (number)', query: 'limit=50&metadata.turn=3' },
  { name: 'status=completed&metadata.model=model-a', query: 'limit=50&status=completed&metadata.model=model-a' },
  { name: 'user_id=annotator-b', query: 'limit=50&user_id=annotator-b' },
  { name: 'user_id=annotator-c&response_status=submitted (matches none: the whole dataset is walked)', query: 'limit=50&user_id=annotator-c&response_status=submitted' },
  { name: 'user_id=annotator-c&response_status=draft (1 in 3 records)', query: 'limit=50&user_id=annotator-c&response_status=draft' },
  { name: 'response_status=draft, cursor page (2nd)', query: 'limit=50&response_status=draft', second: true },
  { name: 'no match anywhere: user_id=nobody (whole dataset looked at)', query: 'limit=50&user_id=nobody' },
];

async function main(): Promise<void> {
  log('starting Redis and the store (FerretDB v2 on PostgreSQL + DocumentDB)');
  const redis = await startRedis();
  const ferret = await startFerretDb();
  const client = new MongoClient(ferret.url, { ...mongoClientOptions(), serverSelectionTimeoutMS: 10_000, monitorCommands: true });
  let api: ReturnType<typeof spawn> | undefined;
  try {
    const db = client.db(DATABASE);
    // The worker's indexes (worker/indexes.ts), created on the empty collections as the worker
    // does at start-up, unless --indexes-after. A build over millions of documents outlasts the
    // driver's default socket timeout: its own client, without one.
    const builder = new MongoClient(ferret.url, { socketTimeoutMS: 0 });
    const buildIndexes = async (): Promise<number> => {
      const started = Date.now();
      try {
        await createSeedIndexes(builder.db(DATABASE), { unique: UNIQUE });
      } finally {
        await builder.close();
      }
      return (Date.now() - started) / 1000;
    };
    const indexesBefore = INDEXES_AFTER ? 0 : await buildIndexes();
    log(`seeding ${RECORDS.toLocaleString('en-US')} records in ${DATASETS.toLocaleString('en-US')} datasets of ${DATASET_RECORDS.toLocaleString('en-US')} (insertMany, ${SEED_BATCH} per batch, ${SEED_IN_FLIGHT} in flight, indexes ${INDEXES_AFTER ? 'built after' : 'in place'}${UNIQUE ? '' : ', record_user_unique not unique'})`);
    const storeCpu0 = storeCpuSeconds(ferret.postgres.port);
    const seeded = await seed(db);
    const seedCpu = storeCpuSeconds(ferret.postgres.port) - storeCpu0;
    log(`seeded ${RECORDS.toLocaleString('en-US')} records and ${seeded.responses.toLocaleString('en-US')} responses in ${seeded.seconds.toFixed(1)} s (store CPU ${seedCpu.toFixed(0)} s)`);
    const indexSeconds = INDEXES_AFTER ? await buildIndexes() : indexesBefore;
    if (INDEXES_AFTER) log(`indexes built in ${indexSeconds.toFixed(1)} s`);

    const port = await freePort();
    api = spawn(process.execPath, ['--import', 'tsx', 'api/main.ts'], {
      cwd: ROOT,
      stdio: ['ignore', 'ignore', 'inherit'],
      env: { PATH: process.env['PATH'] ?? '', PORT: String(port), HOST: '127.0.0.1', REDIS_URL: redis.url, MONGODB_URI: `${ferret.url}/${DATABASE}`, API_KEYS: `${KEY.name}:${KEY.secret}`, READ_API_KEY_NAMES: KEY.name, LOG_LEVEL: 'warn' },
    });
    await waitForPort(port, 60_000);

    // The store queries of each case, from an in-process reader over the same database.
    const reader = createRecordReader({ db });
    const rows: string[] = [];
    const rawPlans: string[] = [];
    for (const c of CASES) {
      const path = `/datasets/${DATASET}/records?${c.query}`;
      const first = await getJson(port, path);
      const timed = c.second ? `${path}&cursor=${first.body['next_cursor'] as string}` : path;
      if (c.second && typeof first.body['next_cursor'] !== 'string') throw new Error(`${c.name}: no second page`);
      const times: number[] = [];
      let items = 0;
      const cpu0 = { all: storeCpuSeconds(ferret.postgres.port), api: treeCpuSeconds(api.pid!) };
      for (let k = 0; k < CALLS; k++) {
        const r = await getJson(port, timed);
        times.push(r.ms);
        items = (r.body['items'] as unknown[]).length;
      }
      // CPU per call: the API process, and the store (PostgreSQL + FerretDB, everything else this bench started but idle Redis).
      const apiMs = ((treeCpuSeconds(api.pid!) - cpu0.api) * 1000) / CALLS;
      const storeMs = ((storeCpuSeconds(ferret.postgres.port) - cpu0.all) * 1000) / CALLS - apiMs;
      times.sort((a, b) => a - b);
      // The commands the API sends for this page, captured from the reader, then explained.
      const commands: CommandStartedEvent[] = [];
      const listener = (e: CommandStartedEvent) => commands.push(e);
      client.on('commandStarted', listener);
      try {
        const query = new URLSearchParams(timed.split('?')[1]);
        await reader.listRecords(DATASET, toListing(parseQuery(RecordListQuery, groupMetadataParams(Object.fromEntries(query)))));
      } finally {
        client.off('commandStarted', listener);
      }
      const plans: string[] = [];
      const raw: string[] = [];
      for (const cmd of commands.filter((e) => e.commandName === 'find')) {
        const { find, filter, sort, limit, projection } = cmd.command as Document;
        const explain = await db.command({ explain: { find, filter, ...(sort === undefined ? {} : { sort }), ...(limit === undefined ? {} : { limit }), ...(projection === undefined ? {} : { projection }) }, verbosity: 'queryPlanner' });
        plans.push(`${find as string}: ${planSummary(explain)}`);
        if (RAW_PLANS) raw.push(`${c.name}, ${find as string} ${JSON.stringify(filter)}:\n${JSON.stringify(explain['queryPlanner'] ?? explain, null, 1)}`);
      }
      const median = quantile(times, 0.5);
      const p95 = quantile(times, 0.95);
      rawPlans.push(...raw);
      log(`${c.name}: median ${median.toFixed(1)} ms, p95 ${p95.toFixed(1)} ms, CPU per call API ${apiMs.toFixed(1)} ms store ${storeMs.toFixed(1)} ms, ${items} items; ${plans.join('; ')}`);
      rows.push(`| ${c.name} | ${median.toFixed(1)} | ${p95.toFixed(1)} | ${apiMs.toFixed(1)} / ${storeMs.toFixed(1)} | ${items} | ${[...new Set(plans)].join('<br>')} |`);
    }

    const stamp = new Date().toISOString().replace(/:/g, '-').replace(/\.\d+Z$/, 'Z');
    const report = [
      `# Reads at scale (bench/reads-at-scale.ts), ${stamp}`,
      '',
      `Command: \`npm run bench:reads -- ${argv.join(' ')}\`; store ${STORE_BACKEND}; ${cpus().length} CPUs, load average ${loadavg()
        .map((l) => l.toFixed(2))
        .join(' / ')} (1/5/15 min) at the end.`,
      `Collection: ${RECORDS.toLocaleString('en-US')} records in ${DATASETS.toLocaleString('en-US')} datasets of ${DATASET_RECORDS.toLocaleString('en-US')} (interleaved in time), ${seeded.responses.toLocaleString('en-US')} responses, seeded in ${seeded.seconds.toFixed(0)} s (store CPU ${seedCpu.toFixed(0)} s) ` +
        `${INDEXES_AFTER ? `with the indexes built after in ${indexSeconds.toFixed(0)} s` : 'with the indexes in place (created on the empty collections)'}${UNIQUE ? '' : '; `record_user_unique` created not unique (bench/lib/seed-indexes.ts)'}. ` +
        `Measured dataset \`${DATASET}\`: record statuses pending/completed, metadata model-a/model-b and turn 0-6, 1-3 responses by annotator-a/b/c in mixed statuses.`,
      `Each row: ${CALLS} calls of \`GET /datasets/${DATASET}/records?…\` through HTTP to the API process, one after another (ms, client side); plans: \`explain\` of each store query the page sends.`,
      '',
      '| query | median ms | p95 ms | CPU ms per call, API / store | items | store queries: indexes in the plan |',
      '|---|---|---|---|---|---|',
      ...rows,
      '',
      ...(RAW_PLANS ? ['## Raw plans', '', '```', ...rawPlans, '```', ''] : []),
    ].join('\n');
    const dir = join(ROOT, 'bench', 'results');
    mkdirSync(dir, { recursive: true });
    const file = join(dir, `reads-${stamp}.md`);
    writeFileSync(file, report);
    process.stdout.write(`\n${report}\nreport: ${file}\n`);
  } finally {
    if (api !== undefined && api.exitCode === null) {
      api.kill('SIGTERM');
      await new Promise((r) => api!.once('exit', r));
    }
    await client.close();
    await ferret.destroy();
    await redis.destroy();
  }
}

await main();
