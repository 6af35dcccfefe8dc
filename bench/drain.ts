// `npm run bench:drain` (issue 10): how fast the worker drains a burst of queued writes, against
// the store's own rate for the same final documents, in the same run; and whether the worker's
// cost per write stays flat as the store grows.
//
//   node --import tsx bench/drain.ts [--writes N] [--seed-docs N] [--rounds N] [--quick]
//
// Per round (alternating): usual mix drain, its raw twin, annotation-heavy drain, its raw twin,
// plain insertMany of as many documents, and the usual mix drained into the large seeded store.
// Each drain and raw pass gets a fresh database seeded with the same 10,000 documents.
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { MongoClient, type AnyBulkWriteOperation, type CommandFailedEvent, type CommandStartedEvent, type CommandSucceededEvent, type Db } from 'mongodb';
import { loadConfig, type Config } from '../shared/config.js';
import { createIdMinter } from '../shared/ids.js';
import { encodeJob } from '../shared/job-payload.js';
import { createLogger } from '../shared/logger.js';
import { COLLECTIONS, mongoClientOptions } from '../shared/mongo.js';
import { createOrderClock } from '../shared/order-clock.js';
import { createWriteQueues, WRITE_JOB_NAME } from '../shared/queue.js';
import { createRedis } from '../shared/redis.js';
import type { RecordWrite, ResponseWrite, Write } from '../shared/schemas.js';
import { startFerretDb, startRedis, type ManagedServer } from '../test/helpers/services.js';
import type { RecordDoc, ResponseDoc } from '../shared/documents.js';
import { firstResponseDoc, recordDoc } from '../worker/documents.js';
import type { JobSummary } from '../worker/processor.js';
import { ensureIndexes } from '../worker/indexes.js';
import { startWorker } from '../worker/runtime.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const T0 = Date.now();

// ---- options ----------------------------------------------------------------------------------

const argv = process.argv.slice(2);
const flag = (name: string) => argv.includes(name);
const num = (name: string, def: number) => {
  const i = argv.indexOf(name);
  if (i < 0) return def;
  const n = Number(argv[i + 1]);
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name} needs a whole number`);
  return n;
};
if (flag('--help')) {
  console.log('usage: node --import tsx bench/drain.ts [--writes N] [--seed-docs N] [--rounds N] [--quick] [--no-big]');
  process.exit(0);
}
const QUICK = flag('--quick');
const WRITES = num('--writes', QUICK ? 3_000 : 20_000);
/** The large store of part 3; --quick defaults lower so that a smoke run stays short on SQLite. */
const SEED_DOCS = num('--seed-docs', QUICK ? 50_000 : 200_000);
const ROUNDS = Math.max(2, num('--rounds', 2));
const BIG = !flag('--no-big');
/** Documents every drain/raw database starts with: half records, half their first responses. */
const BASE_DOCS = 10_000;
const JOB_WRITES = 200;
const RAW_INSERT_BATCH = 500;
/** FerretDB v1 hangs on ~50 matching upserts in one command, or several concurrent bulks. */
const RAW_UPDATE_CHUNK = 10;
const DATASET = 'bench-drain';

// ---- the store: FerretDB on PostgreSQL with the GIN setup (what npm start runs); BENCH_STORE=sqlite ----

interface Store {
  readonly backend: string;
  readonly url: string;
  /** The stand-in's setup step for a database (collections and GIN indexes), before it is written. */
  prepare(database: string): Promise<void>;
  stop(): Promise<void>;
}

async function startStore(): Promise<Store> {
  if (process.env['BENCH_STORE'] === 'sqlite') {
    const server: ManagedServer = await startFerretDb();
    return { backend: 'FerretDB v1.24.2 on SQLite (private server, test/helpers/services.ts startFerretDb)', url: server.url, prepare: async () => undefined, stop: () => server.destroy() };
  }
  const server = await startFerretDb({ backend: 'postgresql' });
  return {
    backend: 'FerretDB v1.24.2 on PostgreSQL 15 with GIN indexes on the filtered fields (private cluster, scripts/ferretdb-pg-setup.ts)',
    url: server.url,
    prepare: async (database) => void (await server.setupDatabase(database)),
    stop: () => server.destroy(),
  };
}

// ---- writes, built as the API builds them -----------------------------------------------------

const ids = createIdMinter(['bench-drain-id-secret-0123456789']);
const clock = createOrderClock();
let requestCounter = 0;
const requestId = () => `bench-${(requestCounter++).toString(36)}`;

function recordWrite(variant: number): RecordWrite {
  const recordId = ids.newRecordId(DATASET);
  const userId = `end-user-${variant % 1000}`;
  return {
    kind: 'record',
    request_id: requestId(),
    accepted_at: Date.now(),
    api_key: 'bench',
    record_id: recordId,
    response_id: ids.responseId(recordId, userId),
    record: {
      feedback_dataset_id: DATASET,
      field_to_value: { prompt: `How do I reset my password? (case ${variant})`, answer: 'Open Settings, then Security, then choose Reset password and follow the link we e-mail you.' },
      external_id: `conv-${variant}:turn-${(variant % 7) + 1}`,
      metadata: { model: 'gpt-x', locale: 'en' },
    },
    response: { status: 'submitted', values: { helpful: variant % 2, ranking: ['answer', 'prompt'] }, user_id: userId },
  };
}

interface Target {
  readonly recordId: string;
  readonly userId: string;
}

function responseWrite(target: Target, n: number): ResponseWrite {
  return {
    kind: 'response',
    request_id: requestId(),
    accepted_at: Date.now(),
    api_key: 'bench',
    record_id: target.recordId,
    response_id: ids.responseId(target.recordId, target.userId),
    response: { status: n % 3 === 0 ? 'draft' : 'submitted', values: { helpful: n % 5, comment: 'clear and correct' }, user_id: target.userId },
  };
}

/** Writes with their order minted as the API does at enqueue(). */
function withSeq(w: Write): Write {
  return { ...w, seq: clock.next() };
}

interface Seed {
  readonly records: RecordDoc[];
  readonly responses: ResponseDoc[];
  readonly targets: Target[];
}

/** `docs` documents in the worker's shapes: records and the first response of each. */
function buildSeed(docs: number): Seed {
  const records: RecordDoc[] = [];
  const responses: ResponseDoc[] = [];
  const targets: Target[] = [];
  for (let i = 0; i < Math.floor(docs / 2); i++) {
    const w = withSeq(recordWrite(1_000_000 + i)) as RecordWrite;
    records.push(recordDoc(w));
    responses.push(firstResponseDoc({ write: w, seq: w.seq!, index: 0 }));
    targets.push({ recordId: w.record_id, userId: w.response.user_id });
  }
  return { records, responses, targets };
}

type MixName = 'usual' | 'annotation-heavy';
const UPDATE_SHARE: Record<MixName, number> = { usual: 0.1, 'annotation-heavy': 0.5 };

interface Burst {
  readonly writes: Write[];
  /** Final seq expected per response id touched by the burst. */
  readonly finalSeq: Map<string, number>;
  readonly newRecords: number;
}

/** N writes, updates spread evenly (every 10th for usual, every other for heavy) over random seeded responses. */
function buildBurst(n: number, mix: MixName, targets: readonly Target[]): Burst {
  const every = Math.round(1 / UPDATE_SHARE[mix]);
  const writes: Write[] = [];
  const finalSeq = new Map<string, number>();
  let newRecords = 0;
  for (let i = 0; i < n; i++) {
    let w: Write;
    if (i % every === every - 1) {
      const t = targets[Math.floor(Math.random() * targets.length)]!;
      w = withSeq(responseWrite(t, i));
    } else {
      w = withSeq(recordWrite(i));
      newRecords++;
    }
    writes.push(w);
    finalSeq.set(w.response_id, Math.max(finalSeq.get(w.response_id) ?? 0, w.seq!));
  }
  return { writes, finalSeq, newRecords };
}

// ---- helpers ----------------------------------------------------------------------------------

const log = (msg: string) => process.stderr.write(`[drain ${((Date.now() - T0) / 1000).toFixed(0)}s] ${msg}\n`);
const median = (xs: readonly number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length === 0 ? Number.NaN : s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
/** Ratios: two decimals, or two significant digits when far below 1. */
const fmtRatio = (x: number) => (Number.isFinite(x) ? (x < 0.1 ? x.toPrecision(2) : x.toFixed(2)) : '–');
const fmt = (x: number, digits = 0) => (Number.isFinite(x) ? x.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits }) : '–');

interface Monitor {
  readonly client: MongoClient;
  /** Commands started since the last reset, by name. */
  take(): Map<string, number>;
  /** Seconds the store spent answering, by command name, since the last take() (summed over concurrent commands). */
  lastSeconds(): Map<string, number>;
}

/** A client with the worker's options (shared/mongo.ts createMongo) that counts the commands it sends. */
async function monitoredClient(url: string): Promise<Monitor> {
  const client = new MongoClient(url, { ...mongoClientOptions(), retryWrites: false, serverSelectionTimeoutMS: 5000, socketTimeoutMS: 120_000, appName: 'bench-drain', monitorCommands: true });
  let counts = new Map<string, number>();
  let seconds = new Map<string, number>();
  let taken = new Map<string, number>();
  client.on('commandStarted', (e: CommandStartedEvent) => counts.set(e.commandName, (counts.get(e.commandName) ?? 0) + 1));
  const ended = (e: CommandSucceededEvent | CommandFailedEvent) => seconds.set(e.commandName, (seconds.get(e.commandName) ?? 0) + e.duration / 1000);
  client.on('commandSucceeded', ended);
  client.on('commandFailed', ended);
  await client.connect();
  return {
    client,
    take() {
      const c = counts;
      counts = new Map();
      taken = seconds;
      seconds = new Map();
      return c;
    },
    lastSeconds: () => taken,
  };
}

const sumCounts = (c: Map<string, number>) => [...c.values()].reduce((a, b) => a + b, 0);
const countsText = (c: Map<string, number>) => [...c.entries()].sort((a, b) => b[1] - a[1]).map(([k, v]) => `${k} ${v}`).join(', ');

async function seedDb(db: Db, seed: Seed): Promise<number> {
  const started = Date.now();
  await ensureIndexes(db);
  const records = db.collection<RecordDoc>(COLLECTIONS.records);
  const responses = db.collection<ResponseDoc>(COLLECTIONS.responses);
  for (let i = 0; i < seed.records.length; i += RAW_INSERT_BATCH) {
    await records.insertMany(seed.records.slice(i, i + RAW_INSERT_BATCH), { ordered: false });
    await responses.insertMany(seed.responses.slice(i, i + RAW_INSERT_BATCH), { ordered: false });
  }
  return (Date.now() - started) / 1000;
}

// ---- 1. worker drain ----------------------------------------------------------------------------

interface DrainResult {
  readonly seconds: number;
  readonly rate: number;
  readonly commands: Map<string, number>;
  /** Store seconds by command name (summed over concurrent commands). */
  readonly storeSeconds: Map<string, number>;
  readonly summary: JobSummary;
  readonly failedAttempts: number;
  readonly verified: string;
}

/**
 * Queues the burst as the API does (deflated jobs of 200 writes on the write queue) with no worker
 * running, then starts the worker (worker/runtime.ts `startWorker`, on a MongoClient of ours so
 * that its store commands can be counted) and times until every job has completed, from the call
 * that starts it (its index check included).
 */
async function drain(redisUrl: string, mon: Monitor, dbName: string, burst: Burst, seed: Seed): Promise<DrainResult> {
  const queueName = `drain-${randomBytes(4).toString('hex')}`;
  const config: Config = loadConfig({ REDIS_URL: redisUrl, MONGODB_URI: `${storeUrl}/${dbName}`, QUEUE_NAME: queueName, LOG_LEVEL: 'warn' });
  const logger = createLogger({ level: 'warn', name: 'bench-drain-worker', destination: process.stderr });
  const producer = createRedis(config, 'producer', logger);
  // One shard (QUEUE_SHARDS defaults to 1 on one Redis): the worker drains what this queue holds.
  const queue = createWriteQueues(config, producer).shards[0]!.queue;
  let jobs = 0;
  for (let i = 0; i < burst.writes.length; i += JOB_WRITES) {
    await queue.add(WRITE_JOB_NAME, await encodeJob(burst.writes.slice(i, i + JOB_WRITES), config.queueCompression));
    jobs++;
  }

  const db = mon.client.db(dbName);
  const summary = { records: 0, responses: 0, stale: 0, dead_lettered: 0 };
  let completed = 0;
  let failedAttempts = 0;
  let done!: () => void;
  const allDone = new Promise<void>((res) => (done = res));
  mon.take();
  const started = process.hrtime.bigint();
  // The service's own worker, on our client so that its store commands are counted.
  const runtime = await startWorker(config, logger, { mongo: { client: mon.client, db, close: async () => undefined }, defaultMetrics: false });
  const worker = runtime.worker;
  worker.on('completed', (_job, r: JobSummary) => {
    summary.records += r.records;
    summary.responses += r.responses;
    summary.stale += r.stale;
    summary.dead_lettered += r.dead_lettered;
    if (++completed === jobs) done();
  });
  worker.on('failed', (job, err) => {
    failedAttempts++;
    log(`job ${job?.id ?? '?'} attempt failed: ${err.message}`);
  });
  await allDone;
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const commands = mon.take();
  const storeSeconds = mon.lastSeconds();
  const counts = await queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized', 'failed');
  await runtime.close();
  await queue.close();
  await producer.quit();
  const verified = await verify(db, seed, burst);
  const left = Object.values(counts).reduce((a, b) => a + b, 0);
  return { seconds, rate: burst.writes.length / seconds, commands, storeSeconds, summary, failedAttempts, verified: left === 0 ? verified : `${verified}; queue still holds ${JSON.stringify(counts)}` };
}

/** Counts in the store, and every response touched holds the expected final seq. */
async function verify(db: Db, seed: Seed, burst: Burst): Promise<string> {
  const records = await db.collection(COLLECTIONS.records).countDocuments();
  const stored = await db.collection<ResponseDoc>(COLLECTIONS.responses).find({}, { projection: { seq: 1 } }).toArray();
  const expectRecords = seed.records.length + burst.newRecords;
  const expectResponses = seed.responses.length + burst.newRecords;
  const seqOf = new Map(stored.map((d) => [d._id, d.seq]));
  let wrong = 0;
  for (const [id, seq] of burst.finalSeq) if (seqOf.get(id) !== seq) wrong++;
  const ok = records === expectRecords && stored.length === expectResponses && wrong === 0;
  const text = `records ${records}/${expectRecords}, responses ${stored.length}/${expectResponses}, wrong final seq ${wrong}/${burst.finalSeq.size}`;
  if (!ok) log(`VERIFY FAILED: ${text}`);
  return ok ? `ok (${text})` : `FAILED (${text})`;
}

// ---- 2. the store's raw rate for the same final documents -------------------------------------

interface RawResult {
  readonly seconds: number;
  readonly rate: number;
  readonly commands: Map<string, number>;
  readonly insertSeconds: number;
  readonly updateSeconds: number;
  readonly updates: number;
  readonly verified: string;
}

/** insertMany of the new documents (batches of 500), then the distinct final updates, 10 per unordered bulkWrite, one at a time. */
async function raw(mon: Monitor, dbName: string, burst: Burst, seed: Seed): Promise<RawResult> {
  const db = mon.client.db(dbName);
  const records = db.collection<RecordDoc>(COLLECTIONS.records);
  const responses = db.collection<ResponseDoc>(COLLECTIONS.responses);
  const recordDocs: RecordDoc[] = [];
  const responseDocs: ResponseDoc[] = [];
  const finalUpdate = new Map<string, ResponseWrite>();
  for (const w of burst.writes) {
    if (w.kind === 'record') {
      recordDocs.push(recordDoc(w));
      responseDocs.push(firstResponseDoc({ write: w, seq: w.seq!, index: 0 }));
    } else if ((finalUpdate.get(w.response_id)?.seq ?? -1) < w.seq!) finalUpdate.set(w.response_id, w);
  }
  const ops: AnyBulkWriteOperation<ResponseDoc>[] = [...finalUpdate.values()].map((w) => ({
    updateOne: {
      filter: { _id: w.response_id },
      update: { $set: { status: w.response.status, values: w.response.values, seq: w.seq!, api_key: w.api_key, request_id: w.request_id, updated_at: new Date(w.accepted_at) } },
    },
  }));
  mon.take();
  const started = process.hrtime.bigint();
  for (let i = 0; i < recordDocs.length; i += RAW_INSERT_BATCH) {
    await records.insertMany(recordDocs.slice(i, i + RAW_INSERT_BATCH), { ordered: false });
    await responses.insertMany(responseDocs.slice(i, i + RAW_INSERT_BATCH), { ordered: false });
  }
  const inserted = process.hrtime.bigint();
  for (let i = 0; i < ops.length; i += RAW_UPDATE_CHUNK) await responses.bulkWrite(ops.slice(i, i + RAW_UPDATE_CHUNK), { ordered: false });
  const ended = process.hrtime.bigint();
  const commands = mon.take();
  const seconds = Number(ended - started) / 1e9;
  return {
    seconds,
    rate: burst.writes.length / seconds,
    commands,
    insertSeconds: Number(inserted - started) / 1e9,
    updateSeconds: Number(ended - inserted) / 1e9,
    updates: ops.length,
    verified: await verify(db, seed, burst),
  };
}

/** Plain insertMany (batches of 500) of as many documents as the burst's writes hold (a record and a response per record write, a response per update), fresh ids. */
async function plainInserts(mon: Monitor, dbName: string, burst: Burst): Promise<{ seconds: number; rate: number; docs: number }> {
  const db = mon.client.db(dbName);
  const records = db.collection<RecordDoc>(COLLECTIONS.records);
  const responses = db.collection<ResponseDoc>(COLLECTIONS.responses);
  const recordDocs: RecordDoc[] = [];
  const responseDocs: ResponseDoc[] = [];
  for (const w of burst.writes) {
    const r = w.kind === 'record' ? w : recordWrite(0);
    if (w.kind === 'record') recordDocs.push(recordDoc(r));
    const doc = firstResponseDoc({ write: r, seq: w.seq!, index: 0 });
    responseDocs.push(w.kind === 'record' ? doc : { ...doc, _id: `rsp_plain_${w.seq!}`, user_id: `plain-${w.seq!}` });
  }
  const started = process.hrtime.bigint();
  for (let i = 0; i < recordDocs.length; i += RAW_INSERT_BATCH) await records.insertMany(recordDocs.slice(i, i + RAW_INSERT_BATCH), { ordered: false });
  for (let i = 0; i < responseDocs.length; i += RAW_INSERT_BATCH) await responses.insertMany(responseDocs.slice(i, i + RAW_INSERT_BATCH), { ordered: false });
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  return { seconds, rate: burst.writes.length / seconds, docs: recordDocs.length + responseDocs.length };
}

// ---- main -------------------------------------------------------------------------------------

let storeUrl = '';

interface RoundRow {
  readonly round: number;
  usual?: DrainResult;
  usualRaw?: RawResult;
  heavy?: DrainResult;
  heavyRaw?: RawResult;
  plain?: { seconds: number; rate: number; docs: number };
  big?: DrainResult;
}

const command = `node --import tsx bench/drain.ts ${argv.join(' ')}`.trim();
const stamp = new Date(T0).toISOString().replace(/[:.]/g, '-').replace(/-\d{3}Z$/, 'Z');
const outDir = join(ROOT, 'bench', 'results');
const outFile = join(outDir, `drain-${stamp}.md`);
let backend = '';
let bigSeedText = 'not run';
const rounds: RoundRow[] = [];

function render(final: boolean): string {
  const lines: string[] = [];
  const r = (xs: (number | undefined)[]) => xs.filter((x): x is number => x !== undefined && Number.isFinite(x));
  const ratios = (pick: (row: RoundRow) => number | undefined) => r(rounds.map(pick));
  const usualRatios = ratios((x) => (x.usual && x.usualRaw ? x.usual.rate / x.usualRaw.rate : undefined));
  const heavyRatios = ratios((x) => (x.heavy && x.heavyRaw ? x.heavy.rate / x.heavyRaw.rate : undefined));
  const plainRatios = ratios((x) => (x.usual && x.plain ? x.usual.rate / x.plain.rate : undefined));
  const bigRatios = ratios((x) => (x.usual && x.big ? x.big.rate / x.usual.rate : undefined));
  const cpw = (d: DrainResult | undefined) => (d === undefined ? undefined : sumCounts(d.commands) / WRITES);
  const verdict = (m: number, target: number) => (Number.isFinite(m) ? (m >= target ? `meets ≥ ${target}×` : `below ${target}×`) : '–');

  lines.push(`# Worker drain benchmark (issue 10)${final ? '' : ' — PARTIAL (run in progress or stopped)'}`, '');
  lines.push(`- Command: \`${command}\``);
  lines.push(`- Store: ${backend}; Redis: private redis-server (test/helpers/services.ts startRedis, no persistence)`);
  lines.push(`- Machine: ${cpus().length} × ${cpus()[0]?.model ?? '?'}, load average at start ${loadavg().map((x) => x.toFixed(1)).join(' ')} (shared with other work)`);
  lines.push(`- N = ${fmt(WRITES)} writes per burst, jobs of ${JOB_WRITES} writes (deflated, as the API queues them), worker concurrency 16 (default config), ${ROUNDS} rounds requested, ${rounds.length} run`);
  lines.push(`- Every drain/raw pass runs on a fresh database holding ${fmt(BASE_DOCS)} documents (${fmt(BASE_DOCS / 2)} records + their responses); updates target those responses (random, repeats allowed).`);
  lines.push(`- Large store: ${fmt(SEED_DOCS)} documents seeded with insertMany (${bigSeedText}); its drains add to it round after round.`);
  lines.push(`- Raw: insertMany of the new records and responses (batches of ${RAW_INSERT_BATCH}) + the distinct final updates as \`updateOne({_id}, {$set})\` in unordered bulkWrite of ≤ ${RAW_UPDATE_CHUNK} ops, one command at a time (FerretDB v1 hangs with ~50 matching upserts in one command, or several concurrent bulks). No ordering, leases or lookups.`);
  lines.push(`- Drain timing: from the worker's start (all jobs already queued, store prepared) to the last job completed; then the store is checked (counts, and the final \`seq\` of every response touched).`);
  lines.push('');
  lines.push('| | median | per round | target |', '|---|---|---|---|');
  lines.push(`| usual (10% updates): drain / raw | ${fmtRatio(median(usualRatios))}× | ${usualRatios.map(fmtRatio).join(', ')} | ${verdict(median(usualRatios), 0.8)} |`);
  lines.push(`| annotation-heavy (50% updates): drain / raw | ${fmtRatio(median(heavyRatios))}× | ${heavyRatios.map(fmtRatio).join(', ')} | ${verdict(median(heavyRatios), 0.8)} |`);
  lines.push(`| usual drain / plain insertMany of as many documents | ${fmtRatio(median(plainRatios))}× | ${plainRatios.map(fmtRatio).join(', ')} | |`);
  lines.push(`| usual drain, ${fmt(SEED_DOCS)}-doc store / ${fmt(BASE_DOCS)}-doc store | ${fmtRatio(median(bigRatios))}× | ${bigRatios.map(fmtRatio).join(', ')} | ${verdict(median(bigRatios), 0.8)} |`);
  lines.push('');
  lines.push('| round | pass | seconds | writes/s | store commands | commands / write | check |', '|---|---|---|---|---|---|---|');
  for (const row of rounds) {
    const d = (name: string, x: DrainResult | undefined) => {
      if (x) lines.push(`| ${row.round} | ${name} | ${fmt(x.seconds, 1)} | ${fmt(x.rate)} | ${sumCounts(x.commands)} | ${fmt(cpw(x)!, 3)} | ${x.verified}; stale ${x.summary.stale}, dead-lettered ${x.summary.dead_lettered}, failed attempts ${x.failedAttempts} |`);
    };
    const rw = (name: string, x: RawResult | undefined) => {
      if (x) lines.push(`| ${row.round} | ${name} | ${fmt(x.seconds, 1)} (inserts ${fmt(x.insertSeconds, 1)}, ${x.updates} updates ${fmt(x.updateSeconds, 1)}) | ${fmt(x.rate)} | ${sumCounts(x.commands)} | ${fmt(sumCounts(x.commands) / WRITES, 3)} | ${x.verified} |`);
    };
    d('usual drain', row.usual);
    rw('usual raw', row.usualRaw);
    d('heavy drain', row.heavy);
    rw('heavy raw', row.heavyRaw);
    if (row.plain) lines.push(`| ${row.round} | plain insertMany (${fmt(row.plain.docs)} docs) | ${fmt(row.plain.seconds, 1)} | ${fmt(row.plain.rate)} | | | |`);
    d(`usual drain, ${fmt(SEED_DOCS)}-doc store`, row.big);
  }
  lines.push('');
  lines.push('Store commands by name (drain passes, last round):', '');
  const last = rounds[rounds.length - 1];
  for (const [name, x] of [['usual', last?.usual], ['heavy', last?.heavy], ['usual, large store', last?.big]] as const) {
    if (x) lines.push(`- ${name}: ${countsText(x.commands)}; store seconds by command (summed over concurrent commands): ${[...x.storeSeconds.entries()].sort((a, b) => b[1] - a[1]).map(([k, v]) => `${k} ${fmt(v, 1)}`).join(', ')}`);
  }
  lines.push('');
  return lines.join('\n');
}

function save(final: boolean): void {
  mkdirSync(outDir, { recursive: true });
  writeFileSync(outFile, render(final));
}

async function main(): Promise<void> {
  log(`writes ${WRITES}, seed-docs ${SEED_DOCS}, rounds ${ROUNDS}; results in ${outFile}`);
  const store = await startStore();
  backend = store.backend;
  storeUrl = store.url;
  const redis = await startRedis();
  const mon = await monitoredClient(store.url);
  const stop = async () => {
    await mon.client.close().catch(() => undefined);
    await redis.destroy();
    await store.stop();
  };
  process.once('SIGINT', () => void stop().finally(() => process.exit(130)));
  try {
    const base = buildSeed(BASE_DOCS);
    let big: Seed | undefined;
    if (BIG) {
      big = buildSeed(SEED_DOCS);
      await store.prepare('drain_big');
      const seconds = await seedDb(mon.client.db('drain_big'), big);
      bigSeedText = `seeding took ${fmt(seconds, 1)} s, ${fmt(SEED_DOCS / seconds)} docs/s`;
      log(`large store: ${bigSeedText}`);
    }
    let n = 0;
    const fresh = async () => {
      const name = `drain_${n++}`;
      await store.prepare(name);
      await seedDb(mon.client.db(name), base);
      return name;
    };
    const drop = (name: string) => mon.client.db(name).dropDatabase();
    for (let round = 1; round <= ROUNDS; round++) {
      const row: RoundRow = { round };
      rounds.push(row);
      for (const mix of ['usual', 'annotation-heavy'] as const) {
        const burst = buildBurst(WRITES, mix, base.targets);
        let db = await fresh();
        const d = await drain(redis.url, mon, db, burst, base);
        log(`round ${round} ${mix} drain: ${fmt(d.rate)} writes/s in ${fmt(d.seconds, 1)} s, ${d.verified}`);
        await drop(db);
        db = await fresh();
        const rw = await raw(mon, db, burst, base);
        log(`round ${round} ${mix} raw: ${fmt(rw.rate)} writes/s in ${fmt(rw.seconds, 1)} s`);
        await drop(db);
        if (mix === 'usual') {
          row.usual = d;
          row.usualRaw = rw;
          db = await fresh();
          row.plain = await plainInserts(mon, db, burst);
          log(`round ${round} plain insertMany: ${fmt(row.plain.rate)} writes/s`);
          await drop(db);
        } else {
          row.heavy = d;
          row.heavyRaw = rw;
        }
        save(false);
      }
      if (big !== undefined) {
        const burst = buildBurst(WRITES, 'usual', big.targets);
        // The large store keeps the earlier rounds' writes: check against what it holds now.
        const before: Seed = { ...big, records: [...big.records, ...new Array<RecordDoc>((round - 1) * burst.newRecords)], responses: [...big.responses, ...new Array<ResponseDoc>((round - 1) * burst.newRecords)] };
        row.big = await drain(redis.url, mon, 'drain_big', burst, before);
        log(`round ${round} usual drain on ${SEED_DOCS} docs: ${fmt(row.big.rate)} writes/s in ${fmt(row.big.seconds, 1)} s, ${row.big.verified}`);
        save(false);
      }
    }
    save(true);
    console.log(render(true));
    console.log(`(written to ${outFile}; took ${fmt((Date.now() - T0) / 1000)} s)`);
  } finally {
    await stop();
  }
}

await main();
