// `npm run bench`: this project against its own ceiling and the designs a user would otherwise
// pick, on one machine, in one run. See bench/README.md for what is measured and how to read it.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import ts from 'typescript';
import { MongoClient, type Db } from 'mongodb';
import { loadConfig } from '../shared/config.js';
import { COLLECTIONS, mongoClientOptions } from '../shared/mongo.js';
import type { RecordWrite } from '../shared/schemas.js';
import { ensureIndexes } from '../worker/indexes.js';
import { buildMix, recordBody, runLoad, type LoadResult, type LoadRun, type Mix } from './lib/load.js';
import { cpuSeconds, killAllSync, machineCpu, rssKb, spawnProc, stopAll, type Proc } from './lib/procs.js';
import { bucketQuantile, bucketsDiff, scrape, sumOf, type Scrape } from './lib/prom.js';
import { rawInsertManyRate } from './lib/raw.js';
import { fmt, renderMarkdown, renderSvg, roundRatios, summarize } from './lib/report.js';
import { destroyService, freePort, startFerretDbServer, startRedisServer, waitForPort, type Service } from './lib/services.js';
import { DESIGNS, type BenchResult, type BurstResult, type CpuPerRequest, type Design, type RedisMemory, type Round, type RunSummary, type StoreProbe } from './lib/types.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const STARTED = new Date();
const T0 = Date.now();

// ---- options ----------------------------------------------------------------------------------

interface Options {
  rounds: number;
  durationS: number;
  connections: number;
  responseShare: number;
  warmupS: number;
  rawS: number;
  burst: number;
  burstConnections: number;
  burstScale: number;
  drainS: number;
  burstDrainS: number;
  env: Record<string, string>;
  cpuProf: boolean;
  logs: boolean;
  logLevel: string;
  outDir: string;
  maxMinutes: number;
  quick: boolean;
  designs: Design[];
}

const HELP = `usage: npm run bench -- [options]

  --quick                 smoke run: 1 round of 3 s, 1 s warm-up, bursts of 5,000 and 2,500
  --rounds N              rounds of every design (default 3)
  --duration S            seconds of load per design and round (default 10)
  --connections N         concurrent connections (default 100)
  --response-share F      share of /feedback-response requests, 0-1 in steps of 0.1 (default 0.1)
  --warmup S              warm-up per design before the rounds, not recorded (default 2)
  --raw S                 seconds of raw insertMany per round (default 3)
  --burst N               records in the burst (default 100000; 0 skips the bursts)
  --burst-connections N   connections of the burst (default 400)
  --burst-scale F         size of the second burst relative to the first (default 0.5; 0 skips it)
  --drain S               longest wait for the worker to store a round's backlog (default 15); what
                          is not stored by then is thrown away (worker restarted, queue emptied)
  --burst-drain S         the same after each burst, from its last answer (default 120)
  --designs a,b           subset of ${DESIGNS.join(',')}
  --env KEY=VALUE         environment for the project's web and worker processes (repeatable),
                          e.g. --env BATCH_MAX_IN_FLIGHT=4 --env WORKER_CONCURRENCY=8
  --log-level L           LOG_LEVEL of every server (default info; logs go to /dev/null)
  --logs                  keep the servers' stdout in bench/results/tmp/ instead of /dev/null
  --cpu-prof              run the Node servers with --cpu-prof (profiles in bench/results/tmp/)
  --out DIR               where results go (default bench/results)
  --max-minutes M         stop everything after M minutes whatever happens (default 20)
`;

function parseArgs(argv: readonly string[]): Options {
  const quick = argv.includes('--quick');
  const o: Options = {
    rounds: quick ? 1 : 3,
    durationS: quick ? 3 : 10,
    connections: 100,
    responseShare: 0.1,
    warmupS: quick ? 1 : 2,
    rawS: quick ? 1 : 3,
    burst: quick ? 5_000 : 100_000,
    burstConnections: 400,
    burstScale: 0.5,
    drainS: quick ? 10 : 15,
    burstDrainS: quick ? 15 : 120,
    env: {},
    cpuProf: false,
    logs: false,
    logLevel: 'info',
    outDir: join(ROOT, 'bench', 'results'),
    maxMinutes: 20,
    quick,
    designs: [...DESIGNS],
  };
  const num = (flag: string, v: string | undefined, min: number, max: number): number => {
    const n = Number(v);
    if (v === undefined || !Number.isFinite(n) || n < min || n > max) throw new Error(`${flag} needs a number from ${min} to ${max}`);
    return n;
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const next = () => argv[++i];
    switch (a) {
      case '--quick':
        break;
      case '--rounds':
        o.rounds = Math.round(num(a, next(), 1, 50));
        break;
      case '--duration':
        o.durationS = num(a, next(), 1, 600);
        break;
      case '--connections':
        o.connections = Math.round(num(a, next(), 1, 5000));
        break;
      case '--response-share':
        o.responseShare = num(a, next(), 0, 1);
        break;
      case '--warmup':
        o.warmupS = num(a, next(), 0, 120);
        break;
      case '--raw':
        o.rawS = num(a, next(), 0.5, 120);
        break;
      case '--burst':
        o.burst = Math.round(num(a, next(), 0, 10_000_000));
        break;
      case '--burst-connections':
        o.burstConnections = Math.round(num(a, next(), 1, 5000));
        break;
      case '--burst-scale':
        o.burstScale = num(a, next(), 0, 20);
        break;
      case '--drain':
        o.drainS = num(a, next(), 1, 3600);
        break;
      case '--burst-drain':
        o.burstDrainS = num(a, next(), 1, 3600);
        break;
      case '--designs': {
        const list = (next() ?? '').split(',').map((s) => s.trim());
        const bad = list.filter((d) => !(DESIGNS as readonly string[]).includes(d));
        if (bad.length > 0) throw new Error(`--designs: unknown ${bad.join(', ')}`);
        o.designs = DESIGNS.filter((d) => list.includes(d));
        break;
      }
      case '--env': {
        const kv = next() ?? '';
        const eq = kv.indexOf('=');
        if (eq <= 0) throw new Error('--env needs KEY=VALUE');
        o.env[kv.slice(0, eq)] = kv.slice(eq + 1);
        break;
      }
      case '--log-level':
        o.logLevel = next() ?? 'info';
        break;
      case '--logs':
        o.logs = true;
        break;
      case '--cpu-prof':
        o.cpuProf = true;
        break;
      case '--out':
        o.outDir = next() ?? o.outDir;
        break;
      case '--max-minutes':
        o.maxMinutes = num(a, next(), 1, 600);
        break;
      case '-h':
      case '--help':
        process.stdout.write(HELP);
        process.exit(0);
        break;
      default:
        throw new Error(`unknown option ${a} (see --help)`);
    }
  }
  return o;
}

// ---- small helpers --------------------------------------------------------------------------

const elapsed = () => {
  const s = Math.floor((Date.now() - T0) / 1000);
  return `${String(Math.floor(s / 60)).padStart(2, '0')}:${String(s % 60).padStart(2, '0')}`;
};
const progress = (msg: string) => process.stderr.write(`[bench ${elapsed()}] ${msg}\n`);
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const now = () => Number(process.hrtime.bigint()) / 1e6;

let fatal: Error | undefined;
function checkFatal(): void {
  if (fatal !== undefined) throw fatal;
}

async function until<T>(what: string, timeoutMs: number, pollMs: number, check: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    checkFatal();
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${Math.round(timeoutMs / 1000)} s waiting for ${what}`);
    await sleep(pollMs);
  }
}

// ---- the benchmark --------------------------------------------------------------------------

interface Ctx {
  readonly opts: Options;
  readonly redis: Service;
  /** The project's store (and the raw insertMany's); replaced by a fresh one when a drain runs out of time. */
  ferret: Service;
  /** The direct design's store, a FerretDB of its own. */
  readonly ferretDirect: Service | undefined;
  readonly procs: Record<'web' | 'worker' | 'ceiling' | 'textbook' | 'direct', Proc | undefined>;
  /** Starts the worker process against the store at `mongoUrl`. */
  readonly spawnWorker: (mongoUrl: string) => Proc;
  readonly ports: Readonly<Record<'web' | 'worker' | 'ceiling' | 'textbook' | 'direct', number>>;
  readonly apiKey: string;
  readonly redisClient: Redis;
  readonly projectQueue: Queue;
  readonly textbookQueue: Queue;
  mongo: MongoClient;
  projectDb: Db;
  rawDb: Db;
  readonly workerConcurrency: number;
  seedIds: string[];
  sampleWrite: RecordWrite | undefined;
}

const serverOf: Record<Design, 'web' | 'ceiling' | 'textbook' | 'direct'> = {
  ceiling: 'ceiling',
  textbook: 'textbook',
  direct: 'direct',
  project: 'web',
  project_live: 'web',
};

/** Records created through the API before the rounds; the /feedback-response share updates them. */
const SEED_RECORDS = 200;

const UNFINISHED = ['wait', 'active', 'delayed', 'prioritized', 'waiting-children'] as const;

async function backlogJobs(queue: Queue): Promise<number> {
  const counts = await queue.getJobCounts(...UNFINISHED);
  return Object.values(counts).reduce((a, b) => a + b, 0);
}

async function usedMemory(redis: Redis): Promise<number> {
  const info = await redis.info('memory');
  return Number(/used_memory:(\d+)/.exec(info)?.[1] ?? Number.NaN);
}

async function server200s(ctx: Ctx, design: Design): Promise<number> {
  const s = await scrape(`http://127.0.0.1:${ctx.ports[serverOf[design]]}/metrics`);
  return sumOf(s, 'feedback_api_http_requests_total', { method: 'POST', status: '200' });
}

const workerScrape = (ctx: Ctx) => scrape(`http://127.0.0.1:${ctx.ports.worker}/metrics`);
/** Writes the worker has finished (stored, found stored, stale or dead-lettered), from its batch-size histogram. */
const processed = (s: Scrape) => sumOf(s, 'feedback_worker_batch_size_sum');
const jobsDone = (s: Scrape) => sumOf(s, 'feedback_worker_batch_size_count');

interface CpuSnap {
  readonly per: Record<string, number>;
  readonly machine: { busy: number; total: number };
}

function cpuSnap(ctx: Ctx): CpuSnap {
  const per: Record<string, number> = { redis: cpuSeconds(ctx.redis.proc.pid), ferretdb: cpuSeconds(ctx.ferret.proc.pid), loadgen: cpuSeconds(process.pid) };
  if (ctx.ferretDirect !== undefined) per['ferretdb_direct'] = cpuSeconds(ctx.ferretDirect.proc.pid);
  for (const [name, p] of Object.entries(ctx.procs)) if (p !== undefined) per[name] = cpuSeconds(p.pid);
  return { per, machine: machineCpu() };
}

/** CPU µs per unit of work by role (`server` is the process under test), and the foreign share of the machine, %. */
function cpuDiff(a: CpuSnap, b: CpuSnap, serverName: string, units: number, storeName = 'ferretdb'): { perUnit: CpuPerRequest; foreignPct: number } {
  const d: Record<string, number> = {};
  let ours = 0;
  for (const k of Object.keys(b.per)) {
    d[k] = (b.per[k] ?? 0) - (a.per[k] ?? 0);
    ours += d[k];
  }
  const perUnit: CpuPerRequest = {};
  const us = (x: number | undefined) => (units > 0 && x !== undefined ? (x * 1e6) / units : Number.NaN);
  perUnit['server'] = us(d[serverName]);
  perUnit['redis'] = us(d['redis']);
  perUnit['ferretdb'] = us(d[storeName]);
  perUnit['worker'] = us(d['worker']);
  perUnit['loadgen'] = us(d['loadgen']);
  const busy = b.machine.busy - a.machine.busy;
  const total = b.machine.total - a.machine.total;
  return { perUnit, foreignPct: total > 0 ? (Math.max(0, busy - ours) / total) * 100 : Number.NaN };
}

function mixFor(ctx: Ctx, datasetId: string, responseShare = ctx.opts.responseShare): Mix {
  return buildMix({ datasetId, apiKey: ctx.apiKey, responseTargets: ctx.seedIds, responseShare });
}

/** One timed run of `design`; `during` runs alongside the load (sampling) until it ends. */
async function measure(ctx: Ctx, design: Design, round: number, durationS: number, during?: (load: LoadRun) => Promise<void>): Promise<{ summary: RunSummary; load: LoadResult; mix: Mix }> {
  checkFatal();
  const mix = mixFor(ctx, `bench_r${round}_${design}`);
  const s0 = await server200s(ctx, design);
  const c0 = cpuSnap(ctx);
  const run = runLoad({ url: `http://127.0.0.1:${ctx.ports[serverOf[design]]}`, connections: ctx.opts.connections, requests: mix.requests, durationS, maxS: durationS + 30 });
  const sampling = during?.(run);
  const load = await run.done;
  const c1 = cpuSnap(ctx);
  await sampling;
  const serverOk = (await server200s(ctx, design)) - s0;
  const cpu = cpuDiff(c0, c1, serverOf[design], serverOk, design === 'direct' ? 'ferretdb_direct' : 'ferretdb');
  const summary: RunSummary = {
    design,
    round,
    durationS: load.durationS,
    ok: load.ok,
    serverOk,
    rps: load.rps,
    non2xx: load.non2xx,
    statusCodes: load.statusCodes,
    errors: load.errors,
    timeouts: load.timeouts,
    latencyMs: load.latencyMs,
    cpuUsPerRequest: cpu.perUnit,
    foreignCpuPct: cpu.foreignPct,
  };
  const bad = Object.entries(load.statusCodes).filter(([c]) => !c.startsWith('2'));
  progress(
    `  ${design.padEnd(12)} ${fmt(load.rps).padStart(7)} req/s  p50 ${load.latencyMs.p50.toFixed(1)} ms  p99 ${load.latencyMs.p99.toFixed(1)} ms  max ${load.latencyMs.max.toFixed(0)} ms` +
      `  server ${fmt(cpu.perUnit['server'])} µs/req  redis ${fmt(cpu.perUnit['redis'])}  ferretdb ${fmt(cpu.perUnit['ferretdb'])}  worker ${fmt(cpu.perUnit['worker'])}  loadgen ${fmt(cpu.perUnit['loadgen'])}  foreign ${fmt(cpu.foreignPct)}%` +
      (bad.length > 0 || load.errors > 0 ? `  NON-2XX ${JSON.stringify(Object.fromEntries(bad))} errors ${load.errors}` : ''),
  );
  return { summary, load, mix };
}

/** Mean JSON bytes per write of a few queued jobs (what Redis holds as job data). */
async function jobJsonBytesPerWrite(queue: Queue): Promise<number> {
  const jobs = await queue.getJobs(['wait', 'prioritized'], 0, 9);
  let bytes = 0;
  let writes = 0;
  for (const j of jobs) {
    const data = j.data as { writes?: unknown[]; n?: number };
    bytes += Buffer.byteLength(JSON.stringify(j.data));
    writes += data.writes?.length ?? data.n ?? 0; // plain (v1) or deflated (v2) job
  }
  return writes > 0 ? bytes / writes : Number.NaN;
}

async function waitProjectIdle(ctx: Ctx, timeoutMs = 180_000): Promise<void> {
  await until('the project queue to drain', timeoutMs, 50, async () => ((await backlogJobs(ctx.projectQueue)) === 0 ? true : undefined));
}

/** Waits up to `budgetS` for the project queue to be empty; true when it is. */
async function drainWithin(ctx: Ctx, budgetS: number): Promise<boolean> {
  const deadline = Date.now() + budgetS * 1000;
  for (;;) {
    checkFatal();
    if ((await backlogJobs(ctx.projectQueue)) === 0) return true;
    if (Date.now() > deadline) return false;
    await sleep(50);
  }
}

/** A client of the project's current store, with the raw insertMany collections indexed like the project's. */
async function connectStore(ctx: Pick<Ctx, 'ferret'> & Partial<Pick<Ctx, 'mongo'>>): Promise<{ mongo: MongoClient; projectDb: Db; rawDb: Db }> {
  const mongo = new MongoClient(ctx.ferret.url, { ...mongoClientOptions(), serverSelectionTimeoutMS: 10_000, retryWrites: false });
  const rawDb = mongo.db('bench_raw');
  await ensureIndexes(rawDb);
  return { mongo, projectDb: mongo.db('bench_project'), rawDb };
}

/**
 * When the worker could not store a backlog within its budget, the bench throws that backlog
 * away so that the next measurement does not run beside it: the worker and its FerretDB are
 * killed (FerretDB would go on scanning for the dead worker's requests, and a FerretDB/SQLite
 * restarted on the same files panics in createIndexes), the queue is obliterated, and the worker
 * starts again on a fresh FerretDB, seeded again. Only the benchmark's own data is lost.
 */
async function resetProject(ctx: Ctx): Promise<void> {
  const left = await backlogJobs(ctx.projectQueue);
  progress(`  throwing away the ${fmt(left)} jobs the worker did not store in time (worker restarted on a fresh FerretDB, queue emptied)`);
  await ctx.procs.worker?.kill();
  await ctx.mongo.close(true).catch(() => undefined);
  await destroyService(ctx.ferret);
  await ctx.projectQueue.obliterate({ force: true });
  ctx.ferret = await startFerretDbServer(ROOT);
  Object.assign(ctx, await connectStore(ctx));
  ctx.procs.worker = ctx.spawnWorker(ctx.ferret.url);
  await waitForPort(ctx.ports.worker, 60_000).catch((err: unknown) => {
    throw new Error(`the restarted worker did not come up: ${(err as Error).message}\n${ctx.procs.worker?.stderrTail() ?? ''}`);
  });
  await seed(ctx, SEED_RECORDS);
}

async function runCeilingOrDirect(ctx: Ctx, design: 'ceiling' | 'direct', round: number, r: Round): Promise<void> {
  r.runs[design] = (await measure(ctx, design, round, ctx.opts.durationS)).summary;
}

async function runTextbook(ctx: Ctx, round: number, r: Round): Promise<void> {
  await ctx.textbookQueue.obliterate({ force: true });
  await sleep(300);
  const mem0 = await usedMemory(ctx.redisClient);
  const { summary, mix } = await measure(ctx, 'textbook', round, ctx.opts.durationS);
  r.runs.textbook = summary;
  await sleep(500);
  const mem1 = await usedMemory(ctx.redisClient);
  const jobs = await backlogJobs(ctx.textbookQueue);
  r.textbookRedis = redisMemory(mem1 - mem0, summary.serverOk, jobs, mix.meanBodyBytes, await jobJsonBytesPerWrite(ctx.textbookQueue));
  const t = now();
  await ctx.textbookQueue.obliterate({ force: true });
  progress(`  textbook: Redis ${fmt(r.textbookRedis.bytesPerWrite)} B per queued write (${fmt(jobs)} jobs); queue emptied in ${fmt((now() - t) / 1000, 1)} s`);
}

function redisMemory(delta: number, writes: number, jobs: number, payload: number, jobJson: number): RedisMemory {
  return {
    deltaBytes: delta,
    writes,
    jobs,
    bytesPerWrite: writes > 0 ? delta / writes : Number.NaN,
    bytesPerJob: jobs > 0 ? delta / jobs : Number.NaN,
    payloadBytes: payload,
    jobJsonBytesPerWrite: jobJson,
  };
}

/** Times one read with `_id` alone (FerretDB/SQLite pushes it down) and one with the worker's upsert filter. */
async function storeProbe(ctx: Ctx): Promise<StoreProbe> {
  const responses = ctx.projectDb.collection<{ _id: string; seq?: number }>(COLLECTIONS.responses);
  const stats = (await ctx.projectDb.command({ collStats: COLLECTIONS.responses })) as { count?: number };
  let t = now();
  await responses.findOne({ _id: 'rsp_probe_absent' }, { maxTimeMS: 60_000 });
  const idOnlyMs = now() - t;
  t = now();
  await responses.findOne({ _id: 'rsp_probe_absent', seq: { $lt: 1 } }, { maxTimeMS: 60_000 });
  const workerFilterMs = now() - t;
  const probe = { responses: stats.count ?? Number.NaN, idOnlyMs, workerFilterMs };
  progress(`  store probe: feedback_responses holds ${fmt(probe.responses)} documents; findOne({_id}) ${idOnlyMs.toFixed(1)} ms, findOne({_id, seq: {$lt}}) (the worker's upsert filter) ${workerFilterMs.toFixed(1)} ms`);
  return probe;
}

/** (d) with the worker paused: the API alone; then Redis bytes per queued write; then the worker alone drains it; then raw insertMany. */
async function runProject(ctx: Ctx, round: number, r: Round): Promise<void> {
  await waitProjectIdle(ctx);
  await ctx.projectQueue.pause();
  let mix: Mix | undefined;
  let meanJobSize: number | undefined;
  try {
    await sleep(300);
    const mem0 = await usedMemory(ctx.redisClient);
    const m = await measure(ctx, 'project', round, ctx.opts.durationS);
    mix = m.mix;
    const summary = m.summary;
    r.runs.project = summary;
    await sleep(500);
    const mem1 = await usedMemory(ctx.redisClient);
    const jobs = await backlogJobs(ctx.projectQueue);
    r.projectRedis = redisMemory(mem1 - mem0, summary.serverOk, jobs, mix.meanBodyBytes, await jobJsonBytesPerWrite(ctx.projectQueue));
    progress(`  project: ${fmt(summary.serverOk)} writes in ${fmt(jobs)} jobs wait in Redis: ${fmt(r.projectRedis.bytesPerWrite)} B per write (JSON body ${fmt(mix.meanBodyBytes)} B, job JSON ${fmt(r.projectRedis.jobJsonBytesPerWrite)} B per write)`);

    const w0 = await workerScrape(ctx);
    const c0 = cpuSnap(ctx);
    const t0 = now();
    await ctx.projectQueue.resume();
    const drained = await drainWithin(ctx, ctx.opts.drainS);
    const seconds = (now() - t0) / 1000;
    const c1 = cpuSnap(ctx);
    const w1 = await workerScrape(ctx);
    const writes = processed(w1) - processed(w0);
    const jobCount = Math.max(1, jobsDone(w1) - jobsDone(w0));
    meanJobSize = writes > 0 ? writes / jobCount : summary.serverOk / Math.max(1, jobs);
    const meanJobWriteMs = ((sumOf(w1, 'feedback_worker_write_duration_seconds_sum') - sumOf(w0, 'feedback_worker_write_duration_seconds_sum')) / jobCount) * 1000;
    const cpu = cpuDiff(c0, c1, 'worker', writes);
    r.drain = { drained, expected: summary.serverOk, writes, seconds, rate: writes / seconds, meanJobSize, meanJobWriteMs, cpuUsPerWrite: cpu.perUnit };
    if (drained && writes !== summary.serverOk) progress(`  WARNING: the worker finished ${fmt(writes)} writes, the API accepted ${fmt(summary.serverOk)}`);
    progress(
      `  worker alone: ${fmt(writes)} of ${fmt(summary.serverOk)} writes in ${seconds.toFixed(2)} s = ${fmt(r.drain.rate)} writes/s${drained ? '' : ' (NOT DRAINED within --drain)'} ` +
        `(jobs of ${meanJobSize.toFixed(1)}, ${fmt(meanJobWriteMs, 1)} ms of MongoDB writes per job; worker ${fmt(cpu.perUnit['worker'])} µs/write, ferretdb ${fmt(cpu.perUnit['ferretdb'])}, redis ${fmt(cpu.perUnit['redis'])})`,
    );
    if (!drained) await resetProject(ctx);
    r.projectRedis = { ...r.projectRedis, usedAfterDrainBytes: await usedMemory(ctx.redisClient) };
  } finally {
    await ctx.projectQueue.resume();
  }
  r.storeProbe = await storeProbe(ctx);
  if (ctx.sampleWrite !== undefined && mix !== undefined) {
    const raw = await rawInsertManyRate(ctx.rawDb, ctx.sampleWrite, { batch: meanJobSize ?? 100, concurrency: ctx.workerConcurrency, seconds: ctx.opts.rawS, recordShare: mix.recordShare });
    r.raw = raw;
    progress(`  raw insertMany: ${fmt(raw.rate)} writes/s (batches of ${raw.batch}, ${raw.concurrency} at a time)`);
  }
}

/** (d) with the worker draining during the load: accept rate on shared cores, end-to-end lag, whether the worker keeps up. */
async function runProjectLive(ctx: Ctx, round: number, r: Round): Promise<void> {
  await waitProjectIdle(ctx);
  const w0 = await workerScrape(ctx);
  let peakJobs = 0;
  let wEnd: Scrape | undefined;
  const { summary } = await measure(ctx, 'project_live', round, ctx.opts.durationS, async (run) => {
    let finished = false;
    void run.done.then(
      () => (finished = true),
      () => (finished = true),
    );
    while (!finished) {
      peakJobs = Math.max(peakJobs, await backlogJobs(ctx.projectQueue));
      await sleep(250);
    }
    wEnd = await workerScrape(ctx);
  });
  r.runs.project_live = summary;
  const t0 = now();
  const drained = await drainWithin(ctx, ctx.opts.drainS);
  const tail = (now() - t0) / 1000;
  const w1 = await workerScrape(ctx);
  const duringLoad = processed(wEnd ?? w1) - processed(w0);
  const lag = bucketsDiff(w0, w1, 'feedback_worker_lag_seconds');
  const p50 = bucketQuantile(lag, 0.5);
  const p99 = bucketQuantile(lag, 0.99);
  r.live = {
    drained,
    storeRateDuringLoad: duringLoad / summary.durationS,
    backlogAtEndWrites: summary.serverOk - duringLoad,
    peakBacklogWrites: Number.NaN,
    drainTailS: tail,
    lagP50Ms: p50 === undefined ? undefined : p50 * 1000,
    lagP99Ms: p99 === undefined ? undefined : p99 * 1000,
    lagCount: lag.at(-1)?.count ?? 0,
  };
  progress(
    `  project+worker: stored ${fmt(r.live.storeRateDuringLoad)} writes/s during the load, ${fmt(r.live.backlogAtEndWrites)} left at its end (peak ${fmt(peakJobs)} jobs), ` +
      `${drained ? `drained ${tail.toFixed(2)} s later` : `NOT DRAINED ${tail.toFixed(0)} s later (${fmt(summary.serverOk - (processed(w1) - processed(w0)))} writes left)`}; lag of stored writes p50 ${fmt(r.live.lagP50Ms)} ms p99 ${fmt(r.live.lagP99Ms)} ms`,
  );
  if (!drained) await resetProject(ctx);
}

async function runBurst(ctx: Ctx, size: number, index: number): Promise<BurstResult> {
  await waitProjectIdle(ctx);
  checkFatal();
  const web = ctx.procs.web!;
  const worker = ctx.procs.worker!;
  const dataset = `bench_burst_${index}_${size}`;
  const mix = mixFor(ctx, dataset, 0);
  const deadLetters = ctx.projectDb.collection(COLLECTIONS.deadLetters);
  const dl0 = await deadLetters.countDocuments({});
  const s0 = await server200s(ctx, 'project');
  const w0 = await workerScrape(ctx);
  const apiRss = { before: rssKb(web.pid), peak: rssKb(web.pid), after: Number.NaN };
  const workerRss = { before: rssKb(worker.pid), peak: rssKb(worker.pid), after: Number.NaN };
  let peakWrites = 0;
  let peakJobs = 0;
  let redisPeak = 0;
  let stored: number;
  const t0 = now();
  progress(`burst ${index + 1}: ${fmt(size)} records from ${ctx.opts.burstConnections} connections`);
  const run = runLoad({ url: `http://127.0.0.1:${ctx.ports.web}`, connections: ctx.opts.burstConnections, requests: mix.requests, amount: size, maxS: Math.max(120, size / 200), timeoutS: 30 });
  let acceptedAt: number | undefined;
  void run.done.then(
    () => (acceptedAt = now()),
    () => (acceptedAt = now()),
  );
  let lastLog = now();
  let target = Number.POSITIVE_INFINITY;
  let drained = false;
  // Samples until the load is over and the worker has finished as many writes as the API
  // accepted, or the drain budget (counted from the last answer) is spent.
  for (;;) {
    checkFatal();
    const [jobs, w, mem] = await Promise.all([backlogJobs(ctx.projectQueue), workerScrape(ctx), usedMemory(ctx.redisClient)]);
    stored = processed(w) - processed(w0);
    peakJobs = Math.max(peakJobs, jobs);
    peakWrites = Math.max(peakWrites, run.ok() - stored);
    redisPeak = Math.max(redisPeak, mem);
    apiRss.peak = Math.max(apiRss.peak, rssKb(web.pid));
    workerRss.peak = Math.max(workerRss.peak, rssKb(worker.pid));
    if (acceptedAt !== undefined && target === Number.POSITIVE_INFINITY) target = (await server200s(ctx, 'project')) - s0;
    if (stored >= target && jobs === 0) {
      drained = true;
      break;
    }
    if (acceptedAt !== undefined && now() - acceptedAt > ctx.opts.burstDrainS * 1000) break;
    if (now() - lastLog > 5000) {
      lastLog = now();
      progress(`  ${acceptedAt === undefined ? 'accepting' : 'draining'}: ${fmt(run.ok())} accepted, ${fmt(stored)} stored, ${fmt(jobs)} jobs waiting, API RSS ${fmt(rssKb(web.pid) / 1024)} MB`);
    }
    await sleep(acceptedAt === undefined ? 250 : 50);
  }
  const drainedAt = now();
  const load = await run.done;
  apiRss.after = rssKb(web.pid);
  workerRss.after = rssKb(worker.pid);
  // Counting by dataset scans the whole collection on FerretDB/SQLite: only worth it when all is stored.
  const records = drained ? await ctx.projectDb.collection(COLLECTIONS.records).countDocuments({ feedback_dataset_id: dataset }, { maxTimeMS: 120_000 }) : Number.NaN;
  const responses = drained ? await ctx.projectDb.collection(COLLECTIONS.responses).countDocuments({ feedback_dataset_id: dataset }, { maxTimeMS: 120_000 }) : Number.NaN;
  const dl = (await deadLetters.countDocuments({})) - dl0;
  const acceptS = ((acceptedAt ?? drainedAt) - t0) / 1000;
  const result: BurstResult = {
    size,
    drained,
    workerFinished: stored,
    connections: ctx.opts.burstConnections,
    accepted: load.ok,
    serverAccepted: target,
    non2xx: load.non2xx,
    statusCodes: load.statusCodes,
    errors: load.errors,
    storedRecords: records,
    storedResponses: responses,
    deadLetters: dl,
    exactlyOnce: drained && records === target && responses === target && dl === 0 && load.ok === target,
    acceptS,
    drainS: (drainedAt - t0) / 1000,
    tailS: (drainedAt - (acceptedAt ?? drainedAt)) / 1000,
    acceptRps: load.ok / acceptS,
    p99Ms: load.latencyMs.p99,
    maxMs: load.latencyMs.max,
    peakBacklogWrites: peakWrites,
    peakBacklogJobs: peakJobs,
    apiRssKb: apiRss,
    workerRssKb: workerRss,
    redisUsedPeakBytes: redisPeak,
  };
  progress(
    `  burst ${index + 1}: accepted ${fmt(load.ok)} (server ${fmt(target)}) in ${acceptS.toFixed(1)} s (${fmt(result.acceptRps)} req/s, p99 ${load.latencyMs.p99.toFixed(0)} ms), ` +
      (drained
        ? `stored ${fmt(records)} records / ${fmt(responses)} responses, all stored after ${result.drainS.toFixed(1)} s`
        : `NOT DRAINED: the worker finished ${fmt(stored)} writes in ${result.drainS.toFixed(1)} s (${fmt(stored / result.drainS)} writes/s)`) +
      `, peak backlog ${fmt(peakWrites)} writes / ${fmt(peakJobs)} jobs, API RSS ${fmt(apiRss.before / 1024)} → ${fmt(apiRss.peak / 1024)} → ${fmt(apiRss.after / 1024)} MB` +
      (drained && !result.exactlyOnce ? '  NOT EXACTLY ONCE' : '') +
      (load.non2xx + load.errors > 0 ? `  non-2xx ${JSON.stringify(load.statusCodes)} errors ${load.errors}` : ''),
  );
  if (!drained) await resetProject(ctx);
  return result;
}

/** Records created through the real API and stored by the worker; the /feedback-response share targets them. */
async function seed(ctx: Ctx, count: number): Promise<void> {
  const body = recordBody('bench_seed', 0);
  const ids: string[] = [];
  let next = 0;
  const one = async (): Promise<void> => {
    while (next < count) {
      next++;
      const res = await fetch(`http://127.0.0.1:${ctx.ports.web}/feedback-record`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${ctx.apiKey}` },
        body,
        signal: AbortSignal.timeout(10_000),
      });
      const json = (await res.json()) as { feedback_record_id?: string };
      if (res.status !== 200 || json.feedback_record_id === undefined) throw new Error(`seeding: /feedback-record answered ${res.status} ${JSON.stringify(json)}`);
      ids.push(json.feedback_record_id);
    }
  };
  await Promise.all(Array.from({ length: 20 }, one));
  await waitProjectIdle(ctx, 60_000);
  const stored = await ctx.projectDb.collection(COLLECTIONS.records).countDocuments({ feedback_dataset_id: 'bench_seed' });
  if (stored < count) throw new Error(`seeding: ${stored} of ${count} records stored`);
  ctx.seedIds = ids;
  // A write as the worker sees it, for the raw insertMany documents.
  const doc = await ctx.projectDb.collection<{ _id: string }>(COLLECTIONS.records).findOne({ feedback_dataset_id: 'bench_seed' });
  const parsed = JSON.parse(body) as { record: RecordWrite['record']; response: { values: Record<string, unknown>; status: 'submitted'; user_id: string } };
  ctx.sampleWrite = {
    kind: 'record',
    request_id: randomBytes(16).toString('hex'),
    accepted_at: Date.now(),
    api_key: 'bench',
    record_id: doc?._id ?? 'rec_x',
    response_id: 'rsp_x',
    record: parsed.record,
    response: parsed.response,
  };
}

/**
 * bench/baselines/server.ts with its types stripped, in .cache/bench/: the comparison servers run
 * as plain JavaScript like the project's compiled dist/ (type-checking is `npm run typecheck`'s job).
 */
function transpileBaselineServer(): string {
  const source = readFileSync(join(ROOT, 'bench', 'baselines', 'server.ts'), 'utf8');
  const out = ts.transpileModule(source, {
    fileName: 'server.ts',
    compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022, verbatimModuleSyntax: true },
  });
  const dir = join(ROOT, '.cache', 'bench');
  mkdirSync(dir, { recursive: true });
  const file = join(dir, 'baseline-server.mjs');
  writeFileSync(file, out.outputText);
  return file;
}

async function main(): Promise<void> {
  const opts = parseArgs(process.argv.slice(2));
  const command = `npm run bench${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}`;
  const watchdog = setTimeout(() => {
    progress(`time limit of ${opts.maxMinutes} min reached: stopping everything`);
    void stopAll(2_000).finally(() => process.exit(2));
  }, opts.maxMinutes * 60_000);
  watchdog.unref();

  for (const f of ['dist/api/main.js', 'dist/worker/main.js', 'dist/api/app.js']) {
    if (!existsSync(join(ROOT, f))) throw new Error(`${f} is missing: run "npm run build" first (scripts/bench.sh does)`);
  }
  const tmpDir = join(opts.outDir, 'tmp');
  mkdirSync(tmpDir, { recursive: true });
  const stamp = STARTED.toISOString().replace(/:/g, '-').replace(/\.\d+Z$/, 'Z');
  const profDir = join(tmpDir, `prof-${stamp}`);

  progress(`starting Redis (AOF everysec, noeviction) and FerretDB; ${opts.rounds} round(s) × ${opts.durationS} s, ${opts.connections} connections, designs ${opts.designs.join(', ')}`);
  const want = new Set(opts.designs);
  const [redis, ferret, ferretDirect] = await Promise.all([startRedisServer(ROOT), startFerretDbServer(ROOT), want.has('direct') ? startFerretDbServer(ROOT) : undefined]);
  const apiKey = `bench-${randomBytes(12).toString('hex')}`;
  const ports = { web: await freePort(), worker: await freePort(), ceiling: await freePort(), textbook: await freePort(), direct: await freePort() };
  const plumbing = {
    PATH: process.env['PATH'] ?? '',
    NODE_ENV: 'production',
    HOST: '127.0.0.1',
    REDIS_URL: redis.url,
    API_KEYS: `bench:${apiKey}`,
    ID_SIGNING_SECRETS: `bench-id-secret-${randomBytes(12).toString('hex')}`,
    LOG_LEVEL: opts.logLevel,
  };
  const died = (p: Proc, code: number | null, signal: NodeJS.Signals | null) => {
    fatal ??= new Error(`${p.name} exited unexpectedly (code ${code ?? '-'}, signal ${signal ?? '-'}):\n${p.stderrTail()}`);
  };
  const nodeArgs = (name: string) => (opts.cpuProf ? ['--cpu-prof', `--cpu-prof-dir=${join(profDir, name)}`] : []);
  const stdoutFile = (name: string) => (opts.logs ? { stdoutFile: join(tmpDir, `${stamp}-${name}.log`) } : {});
  const spawnNode = (name: string, args: string[], env: Record<string, string>) =>
    spawnProc(name, process.execPath, [...nodeArgs(name), ...args], { cwd: ROOT, env, onUnexpectedExit: died, ...stdoutFile(name) });

  const baselineJs = transpileBaselineServer();
  const projectEnv = { ...opts.env, ...plumbing, QUEUE_NAME: 'bench-project' };
  const needProject = want.has('project') || want.has('project_live') || opts.burst > 0;
  const spawnWorker = (mongoUrl: string) => spawnNode('worker', ['dist/worker/main.js'], { ...projectEnv, MONGODB_URI: `${mongoUrl}/bench_project`, PORT: '0', WORKER_METRICS_PORT: String(ports.worker) });
  const procs: Ctx['procs'] = {
    web: needProject ? spawnNode('web', ['dist/api/main.js'], { ...projectEnv, MONGODB_URI: `${ferret.url}/bench_project`, PORT: String(ports.web) }) : undefined,
    worker: needProject ? spawnWorker(ferret.url) : undefined,
    ceiling: want.has('ceiling') ? spawnNode('ceiling', [baselineJs], { ...opts.env, ...plumbing, BENCH_DESIGN: 'ceiling', PORT: String(ports.ceiling), MONGODB_URI: `${ferret.url}/bench_unused` }) : undefined,
    textbook: want.has('textbook') ? spawnNode('textbook', [baselineJs], { ...opts.env, ...plumbing, BENCH_DESIGN: 'textbook', PORT: String(ports.textbook), QUEUE_NAME: 'bench-textbook', MONGODB_URI: `${ferret.url}/bench_unused` }) : undefined,
    direct: want.has('direct') ? spawnNode('direct', [baselineJs], { ...opts.env, ...plumbing, BENCH_DESIGN: 'direct', PORT: String(ports.direct), MONGODB_URI: `${(ferretDirect ?? ferret).url}/bench_direct` }) : undefined,
  };
  for (const [name, p] of Object.entries(procs)) {
    if (p === undefined) continue;
    const port = ports[name as keyof typeof ports];
    await waitForPort(port, 60_000).catch((err: unknown) => {
      throw new Error(`${name} did not listen on ${port}: ${(err as Error).message}\n${p.stderrTail()}`);
    });
  }
  checkFatal();

  const redisClient = new Redis(redis.url, { maxRetriesPerRequest: 3 });
  const queueConnection = { host: '127.0.0.1', port: redis.port };
  const projectQueue = new Queue('bench-project', { connection: queueConnection });
  const textbookQueue = new Queue('bench-textbook', { connection: queueConnection });
  const { mongo, projectDb, rawDb } = await connectStore({ ferret });
  const workerConcurrency = Number(opts.env['WORKER_CONCURRENCY'] ?? loadConfig({}).workerConcurrency);
  const ctx: Ctx = {
    opts,
    redis,
    ferret,
    ferretDirect,
    procs,
    spawnWorker,
    ports,
    apiKey,
    redisClient,
    projectQueue,
    textbookQueue,
    mongo,
    projectDb,
    rawDb,
    workerConcurrency,
    seedIds: [],
    sampleWrite: undefined,
  };

  const rounds: Round[] = [];
  const bursts: BurstResult[] = [];
  const machine: Record<string, string | number> = {
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model ?? 'unknown',
    node: process.versions.node,
    redis: `Redis ${/redis_version:(\S+)/.exec(await redisClient.info('server'))?.[1] ?? '?'}`,
    ferretdb: String(((await mongo.db('admin').command({ buildInfo: 1 })) as { version?: string }).version ?? '?'),
    loadavgAtStart: loadavg().map((x) => x.toFixed(2)).join(' '),
  };
  let mixInfo = { recordBodyBytes: 0, responseBodyBytes: 0, meanBodyBytes: 0, recordShare: 0, connections: opts.connections };

  const finish = (partial: boolean) => {
    const { medians, ratios, targets } = summarize(rounds, bursts);
    const result: BenchResult = {
      startedAt: STARTED.toISOString(),
      finishedAt: new Date().toISOString(),
      wallSeconds: (Date.now() - T0) / 1000,
      command,
      machine,
      options: { ...opts, outDir: relative(ROOT, opts.outDir), partial },
      projectEnv: opts.env,
      mix: mixInfo,
      rounds,
      bursts,
      medians,
      ratios,
      targets,
      notes: NOTES,
    };
    mkdirSync(opts.outDir, { recursive: true });
    const jsonPath = join(opts.outDir, `${stamp}.json`);
    writeFileSync(jsonPath, `${JSON.stringify(result, null, 2)}\n`);
    const md = renderMarkdown(result);
    writeFileSync(join(opts.outDir, `${stamp}.md`), md);
    if (!partial && !opts.quick) {
      writeFileSync(join(opts.outDir, 'latest.md'), md);
      writeFileSync(join(opts.outDir, 'latest.svg'), renderSvg(result));
    } else {
      writeFileSync(join(opts.outDir, `${stamp}.svg`), renderSvg(result));
    }
    return { md, jsonPath };
  };

  try {
    if (needProject) {
      await until('the API to be ready', 30_000, 200, async () => {
        const res = await fetch(`http://127.0.0.1:${ports.web}/readyz`).catch(() => undefined);
        return res?.status === 200 ? true : undefined;
      });
      await waitForPort(ports.worker, 60_000);
      progress(`seeding ${SEED_RECORDS} records through the API (targets of /feedback-response)`);
      await seed(ctx, SEED_RECORDS);
    }
    const probe = mixFor(ctx, 'bench_r1_project');
    mixInfo = { recordBodyBytes: probe.recordBodyBytes, responseBodyBytes: probe.responseBodyBytes, meanBodyBytes: probe.meanBodyBytes, recordShare: probe.recordShare, connections: opts.connections };

    if (opts.warmupS > 0) {
      progress(`warm-up: ${opts.warmupS} s per design (not recorded)`);
      for (const d of opts.designs) {
        checkFatal();
        const run = runLoad({ url: `http://127.0.0.1:${ports[serverOf[d]]}`, connections: opts.connections, requests: mixFor(ctx, 'bench_warmup').requests, durationS: opts.warmupS, maxS: opts.warmupS + 30 });
        await run.done;
        if (d === 'textbook') await textbookQueue.obliterate({ force: true });
        if ((d === 'project' || d === 'project_live') && !(await drainWithin(ctx, opts.drainS))) await resetProject(ctx);
      }
    }

    for (let round = 1; round <= opts.rounds; round++) {
      const order = opts.designs.map((_, i) => opts.designs[(i + round - 1) % opts.designs.length]!);
      progress(`round ${round}/${opts.rounds}: ${order.join(' → ')}`);
      const r: Round = { round, order, runs: {}, ratios: {} };
      rounds.push(r);
      for (const d of order) {
        checkFatal();
        await sleep(500);
        switch (d) {
          case 'ceiling':
          case 'direct':
            await runCeilingOrDirect(ctx, d, round, r);
            break;
          case 'textbook':
            await runTextbook(ctx, round, r);
            break;
          case 'project':
            await runProject(ctx, round, r);
            break;
          case 'project_live':
            await runProjectLive(ctx, round, r);
            break;
        }
      }
      r.ratios = roundRatios(r);
      const q = r.ratios;
      progress(
        `round ${round} ratios: accept/ceiling ${fmt(q['accept_vs_ceiling'], 2)}  accept/textbook ${fmt(q['accept_vs_textbook'], 2)}  p99/textbook ${fmt(q['p99_vs_textbook'], 2)}  ` +
          `store/accept ${fmt(q['store_vs_accept'], 2)}  store/raw ${fmt(q['store_vs_raw'], 2)}  redis/payload ${fmt(q['redis_vs_payload'], 2)}  live/ceiling ${fmt(q['live_accept_vs_ceiling'], 2)}`,
      );
    }

    if (opts.burst > 0 && needProject) {
      const sizes = [opts.burst, ...(opts.burstScale > 0 ? [Math.round(opts.burst * opts.burstScale)] : [])];
      for (const [i, size] of sizes.entries()) bursts.push(await runBurst(ctx, size, i));
    }

    const { md, jsonPath } = finish(false);
    process.stdout.write(`${md}\n`);
    progress(`wrote ${relative(ROOT, jsonPath)}, ${relative(ROOT, jsonPath.replace(/\.json$/, '.md'))}${opts.quick ? ' (quick run: latest.md/latest.svg left alone)' : ', latest.md, latest.svg'}`);
  } catch (err) {
    if (rounds.length > 0 || bursts.length > 0) {
      try {
        const { jsonPath } = finish(true);
        progress(`partial results in ${relative(ROOT, jsonPath)}`);
      } catch {
        // the error below matters more
      }
    }
    throw err;
  } finally {
    await Promise.allSettled([projectQueue.close(), textbookQueue.close(), ctx.mongo.close(), redisClient.quit()]);
    progress('stopping servers');
    await stopAll(opts.cpuProf ? 15_000 : 5_000);
    if (opts.cpuProf) progress(`CPU profiles in ${relative(ROOT, profDir)} (summarise one with: node --import tsx bench/profile.ts ${relative(ROOT, profDir)}/web/*.cpuprofile)`);
  }
}

const NOTES = [
  'Accepted req/s counts 2xx answers per second of load (autocannon); latencies are autocannon\'s (all answers). Every design runs the same Koa app (auth, JSON body, valibot validation, id minting, request log), built with the project\'s createApp from dist/; only the Enqueuer differs.',
  '(d) "worker paused": the project\'s API alone (its BullMQ queue paused), as the ceiling (a) and textbook (b) have no worker competing for the same 2 cores; in production API and worker are separate dynos. "(d) + worker" runs the same load while the worker drains on the same cores.',
  'Worker store rate: the writes queued by the paused run, drained by the worker alone (from resume until the queue is empty). Raw insertMany: the same documents (record + response per write, in batches of the mean job size, as many at a time as WORKER_CONCURRENCY) written by a bare client into collections with the same indexes, right after, in the same round.',
  'Redis bytes per queued write: growth of used_memory while the paused run\'s writes wait in the queue, divided by the writes the API answered 200 for; compared with the mean JSON body of the mix.',
  'End-to-end lag: the worker\'s feedback_worker_lag_seconds histogram over the "(d) + worker" run and its drain (interpolated inside buckets).',
  'CPU µs/req: user+system CPU of each process (from /proc) over the run, per accepted request; "foreign" is CPU used by processes outside the benchmark (other jobs on this machine), which makes absolute numbers drift: compare ratios within a round.',
];

process.on('exit', () => killAllSync());
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.once(sig, () => {
    progress(`${sig}: stopping everything`);
    void stopAll(2_000).finally(() => process.exit(130));
  });
}
process.on('uncaughtException', (err) => {
  progress(`uncaught: ${err.stack ?? err.message}`);
  killAllSync();
  process.exit(1);
});

main().then(
  () => process.exit(0),
  (err: unknown) => {
    progress(`failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    void stopAll(2_000).finally(() => process.exit(1));
  },
);
