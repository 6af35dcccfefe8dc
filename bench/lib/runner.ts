// What every scenario of the benchmark shares: the run's context (services, processes, queues,
// store clients), progress lines, the fatal-error latch, and one timed load run of a design
// (`measure`; CPU accounting in cpu-use.ts). Scenarios live in bench/scenarios/, one file each.
import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { MongoClient, type Db } from 'mongodb';
import { mongoClientOptions } from '../../shared/mongo.js';
import type { RecordWrite } from '../../shared/writes.js';
import { ensureIndexes } from '../../worker/indexes.js';
import { buildMix, runLoad, type LoadResult, type LoadRun, type Mix } from './load.js';
import type { Options } from './options.js';
import { cpuDiff, cpuSnap } from './cpu-use.js';
import type { Proc } from './procs.js';
import { runWrk } from './wrk.js';
import { commandsPerWrite, redisCommandUsec } from './redis-commands.js';
import { scrape, sumOf, type Scrape } from './prom.js';
import { fmt } from './report.js';
import type { Service } from './services.js';
import { LIVE_DESIGNS, type Design, type RedisMemory, type RunSummary } from './types.js';
import type { BenchReceiver } from './webhook-receiver.js';

export { ROOT } from './root.js';
/** When the benchmark started. */
export const STARTED = new Date();
const T0 = STARTED.getTime();


const elapsed = () => {
  const s = Math.floor((Date.now() - T0) / 1000);
  return `${String(Math.floor(s / 60)).padStart(2, '0')}:${String(s % 60).padStart(2, '0')}`;
};
export const progress = (msg: string) => process.stderr.write(`[bench ${elapsed()}] ${msg}\n`);
export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
export const now = () => Number(process.hrtime.bigint()) / 1e6;

let fatal: Error | undefined;
/** Makes every later {@link checkFatal} throw `err` (the first one wins): a server died under the benchmark. */
export function setFatal(err: Error): void {
  fatal ??= err;
}
export function checkFatal(): void {
  if (fatal !== undefined) throw fatal;
}

export async function until<T>(what: string, timeoutMs: number, pollMs: number, check: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    checkFatal();
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${Math.round(timeoutMs / 1000)} s waiting for ${what}`);
    await sleep(pollMs);
  }
}


export interface Ctx {
  readonly opts: Options;
  readonly redis: Service;
  /** The project's store (and the raw insertMany's); replaced by a fresh one when a drain runs out of time. */
  ferret: Service;
  /** The direct design's store, a FerretDB of its own. */
  readonly ferretDirect: Service | undefined;
  readonly procs: Record<Server | 'worker', Proc | undefined>;
  /** Starts the worker process against the store at `mongoUrl`. */
  readonly spawnWorker: (mongoUrl: string) => Proc;
  /** Starts a compiled entry point of the project (`dist/api/main.js`…) with the project's environment plus `env`. */
  readonly spawnProject: (name: string, entry: string, env: Record<string, string>) => Proc;
  readonly ports: Readonly<Record<Server | 'worker', number>>;
  readonly apiKey: string;
  /** A key with the admin scope (only while design project_webhook runs). */
  readonly adminKey: string;
  /** A local receiver of webhook deliveries (started on first use), answering 200 to every POST. */
  readonly webhookReceiver: () => Promise<BenchReceiver>;
  readonly redisClient: Redis;
  readonly projectQueue: Queue;
  readonly textbookQueue: Queue;
  /** The queue of design project_b (no worker drains it; emptied after each run). */
  readonly projectQueueB: Queue;
  mongo: MongoClient;
  projectDb: Db;
  rawDb: Db;
  readonly workerConcurrency: number;
  seedIds: string[];
  sampleWrite: RecordWrite | undefined;
}

/** The server processes a design runs on. */
type Server = 'web' | 'web_b' | 'raw_http' | 'ceiling' | 'textbook' | 'direct';

/** Peers outside the project's code: no /metrics, so their 200s are wrk's and their ELU comes from `GET /elu`. */
const PEERS: ReadonlySet<Server> = new Set(['raw_http', 'textbook']);

export const serverOf: Record<Design, Server> = {
  raw_http: 'raw_http',
  ceiling: 'ceiling',
  textbook: 'textbook',
  direct: 'direct',
  project: 'web',
  project_b: 'web_b',
  project_live: 'web',
  project_webhook: 'web',
};

/** Records created through the API before the rounds; the /feedback-response share updates them. */
export const SEED_RECORDS = 200;

const UNFINISHED = ['wait', 'active', 'delayed', 'prioritized', 'waiting-children'] as const;

export async function backlogJobs(queue: Queue): Promise<number> {
  const counts = await queue.getJobCounts(...UNFINISHED);
  return Object.values(counts).reduce((a, b) => a + b, 0);
}

export async function usedMemory(redis: Redis): Promise<number> {
  const info = await redis.info('memory');
  return Number(/used_memory:(\d+)/.exec(info)?.[1] ?? Number.NaN);
}

export async function server200s(ctx: Ctx, design: Design): Promise<number> {
  if (PEERS.has(serverOf[design])) return Number.NaN;
  const s = await scrape(`http://127.0.0.1:${ctx.ports[serverOf[design]]}/metrics`);
  return sumOf(s, 'feedback_api_http_requests_total', { method: 'POST', status: '200' });
}

export const workerScrape = (ctx: Ctx) => scrape(`http://127.0.0.1:${ctx.ports.worker}/metrics`);
/** Writes the worker has finished (stored, found stored, stale or dead-lettered), from its batch-size histogram. */
export const processed = (s: Scrape) => sumOf(s, 'feedback_worker_batch_size_sum');
export const jobsDone = (s: Scrape) => sumOf(s, 'feedback_worker_batch_size_count');

/** Cumulative event-loop idle and active ms of the server under test (performance.eventLoopUtilization). */
async function eluOf(ctx: Ctx, design: Design): Promise<{ idle: number; active: number }> {
  const server = serverOf[design];
  const base = `http://127.0.0.1:${ctx.ports[server]}`;
  try {
    if (PEERS.has(server)) return (await (await fetch(`${base}/elu`, { signal: AbortSignal.timeout(5_000) })).json()) as { idle: number; active: number };
    const s = await scrape(`${base}/metrics`);
    return { idle: sumOf(s, 'feedback_api_event_loop_seconds', { state: 'idle' }) * 1000, active: sumOf(s, 'feedback_api_event_loop_seconds', { state: 'active' }) * 1000 };
  } catch {
    return { idle: Number.NaN, active: Number.NaN };
  }
}

export function mixFor(ctx: Ctx, datasetId: string, responseShare = ctx.opts.responseShare): Mix {
  return buildMix({ datasetId, apiKey: ctx.apiKey, responseTargets: ctx.seedIds, responseShare });
}

/** One timed run of `design`; `during` runs alongside the load (sampling) until it ends. */
export async function measure(ctx: Ctx, design: Design, round: number, durationS: number, during?: (load: LoadRun) => Promise<void>): Promise<{ summary: RunSummary; load: LoadResult; mix: Mix }> {
  checkFatal();
  const mix = mixFor(ctx, `bench_r${round}_${design}`);
  const s0 = await server200s(ctx, design);
  const e0 = await eluOf(ctx, design);
  const r0 = await redisCommandUsec(ctx.redisClient);
  const c0 = cpuSnap(ctx);
  const url = `http://127.0.0.1:${ctx.ports[serverOf[design]]}`;
  const run =
    ctx.opts.loadgen === 'wrk'
      ? runWrk({ url, connections: ctx.opts.connections, headers: mix.headers, requests: mix.fixed, durationS })
      : runLoad({ url, connections: ctx.opts.connections, requests: mix.requests, durationS, maxS: durationS + 30 });
  const sampling = during?.(run);
  const load = await run.done;
  const c1 = cpuSnap(ctx);
  const r1 = await redisCommandUsec(ctx.redisClient);
  const e1 = await eluOf(ctx, design);
  await sampling;
  const counted = (await server200s(ctx, design)) - s0;
  // A peer counts nothing itself: its 200s are the load generator's.
  const serverOk = Number.isNaN(counted) ? load.ok : counted;
  const elu = (e1.active - e0.active) / (e1.active - e0.active + e1.idle - e0.idle);
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
    elu,
    loadgenCpuPct: cpu.loadgenPct,
    foreignCpuPct: cpu.foreignPct,
    serverCores: cpu.serverCores,
    serverWaitPct: cpu.serverWaitPct,
    machineBusyPct: cpu.machineBusyPct,
    // With the worker on the same cores the API waits for it by design: only foreign jobs starve it then.
    starved: LIVE_DESIGNS.has(design) ? cpu.foreignPct > ctx.opts.starvedForeignPct : cpu.serverWaitPct > ctx.opts.starvedWaitPct,
    redisCommandsUsPerWrite: commandsPerWrite(r0, r1, serverOk),
  };
  const bad = Object.entries(load.statusCodes).filter(([c]) => !c.startsWith('2'));
  progress(
    `  ${design.padEnd(12)} server ${fmt(cpu.perUnit['server'])} µs/write  redis ${fmt(cpu.perUnit['redis'])} µs/write  ${fmt(load.rps).padStart(7)} req/s  p50 ${load.latencyMs.p50.toFixed(1)} ms  p99 ${load.latencyMs.p99.toFixed(1)} ms  max ${load.latencyMs.max.toFixed(0)} ms` +
      `  ferretdb ${fmt(cpu.perUnit['ferretdb'])}  worker ${fmt(cpu.perUnit['worker'])}  loadgen ${fmt(cpu.perUnit['loadgen'])} µs (${fmt(cpu.loadgenPct)}% of the machine)  ELU ${fmt(elu, 2)}` +
      `  server ${fmt(cpu.serverCores, 2)} cores, waited for a CPU ${fmt(cpu.serverWaitPct)}% of the run${summary.starved ? ' (STARVED)' : ''}  machine ${fmt(cpu.machineBusyPct)}% busy, foreign ${fmt(cpu.foreignPct)}%` +
      `  redis commands µs/write ${Object.entries(summary.redisCommandsUsPerWrite ?? {}).slice(0, 6).map(([c, v]) => `${c} ${v.toFixed(1)}`).join(', ')}` +
      (bad.length > 0 || load.errors > 0 ? `  NON-2XX ${JSON.stringify(Object.fromEntries(bad))} errors ${load.errors}` : ''),
  );
  return { summary, load, mix };
}

/** Mean JSON bytes per write of a few queued jobs (what Redis holds as job data). */
export async function jobJsonBytesPerWrite(queue: Queue): Promise<number> {
  const jobs = await queue.getJobs(['wait', 'prioritized'], 0, 9);
  let bytes = 0;
  let writes = 0;
  for (const j of jobs) {
    const data = j.data as { writes?: unknown[]; n?: number };
    bytes += Buffer.byteLength(JSON.stringify(j.data));
    writes += data.writes?.length ?? data.n ?? 1; // plain (v1) or deflated (v2) job; the textbook peer's job holds one write
  }
  return writes > 0 ? bytes / writes : Number.NaN;
}

export async function waitProjectIdle(ctx: Ctx, timeoutMs = 180_000): Promise<void> {
  await until('the project queue to drain', timeoutMs, 50, async () => ((await backlogJobs(ctx.projectQueue)) === 0 ? true : undefined));
}

/** Waits up to `budgetS` for the project queue to be empty; true when it is. */
export async function drainWithin(ctx: Ctx, budgetS: number): Promise<boolean> {
  const deadline = Date.now() + budgetS * 1000;
  for (;;) {
    checkFatal();
    if ((await backlogJobs(ctx.projectQueue)) === 0) return true;
    if (Date.now() > deadline) return false;
    await sleep(50);
  }
}

/** A client of the project's current store, with the raw insertMany collections indexed like the project's. */
export async function connectStore(ctx: Pick<Ctx, 'ferret'> & Partial<Pick<Ctx, 'mongo'>>): Promise<{ mongo: MongoClient; projectDb: Db; rawDb: Db }> {
  const mongo = new MongoClient(ctx.ferret.url, { ...mongoClientOptions(), serverSelectionTimeoutMS: 10_000, retryWrites: false });
  const rawDb = mongo.db('bench_raw');
  await ensureIndexes(rawDb);
  return { mongo, projectDb: mongo.db('bench_project'), rawDb };
}

export function redisMemory(delta: number, writes: number, jobs: number, payload: number, jobJson: number): RedisMemory {
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

