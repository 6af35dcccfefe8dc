// `npm run bench:export` (issue 13): does `GET /datasets/{id}/export` keep the API's memory flat?
// Seeds N records (one response each) straight into the store with insertMany, starts the real
// API process (`api/main.ts`, the `web` entry point, run through tsx), and exports the
// dataset through HTTP twice while sampling the API's RSS from /proc every 100 ms:
//   fast reader: reads as fast as it can, to the end (and checks it got N lines);
//   slow reader: reads at --slow-kib-per-s for --slow-seconds, then hangs up.
// Baseline: the API's RSS after a warm-up request, before the exports.
//
//   node --import tsx bench/export-memory.ts [--records N] [--slow-seconds S] [--slow-kib-per-s K]
//
// The store is the one npm start runs (FerretDB v2 on a private PostgreSQL + DocumentDB).
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { request } from 'node:http';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { MongoClient, type Db } from 'mongodb';
import type { RecordDoc, ResponseDoc } from '../shared/documents.js';
import { COLLECTIONS, mongoClientOptions } from '../shared/mongo.js';
import { ROOT } from './lib/root.js';
import { freePort, startFerretDb, startRedis, waitForPort, type ManagedServer } from '../devkit/servers.js';
import { STORE_BACKEND } from './lib/services.js';
import { ensureIndexes } from '../worker/indexes.js';
import { rssKb } from './lib/procs.js';

const argv = process.argv.slice(2);
const num = (name: string, def: number): number => {
  const i = argv.indexOf(name);
  if (i < 0) return def;
  const n = Number(argv[i + 1]);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${name} needs a positive number`);
  return n;
};
if (argv.includes('--help')) {
  process.stdout.write('usage: npm run bench:export -- [--records N (1000000)] [--slow-seconds S (20)] [--slow-kib-per-s K (256)]\n');
  process.exit(0);
}
const RECORDS = Math.floor(num('--records', 1_000_000));
const SLOW_SECONDS = num('--slow-seconds', 20);
const SLOW_BYTES_PER_S = num('--slow-kib-per-s', 256) * 1024;
const SEED_BATCH = 5_000;
const DATASET = 'bench-export';
const DATABASE = 'bench_export';
const KEY = { name: 'bench', secret: `bench-${randomBytes(12).toString('hex')}` };

const log = (line: string) => process.stdout.write(`${new Date().toISOString().slice(11, 19)} ${line}\n`);

function docs(from: number, to: number): { records: RecordDoc[]; responses: ResponseDoc[] } {
  const records: RecordDoc[] = [];
  const responses: ResponseDoc[] = [];
  const base = Date.UTC(2026, 0, 1);
  for (let i = from; i < to; i++) {
    const at = new Date(base + i);
    const id = `rec_bench_${i.toString(36).padStart(8, '0')}`;
    records.push({
      _id: id,
      feedback_dataset_id: DATASET,
      field_to_value: { prompt: `How do I reset my password? (case ${i})`, answer: 'Open Settings, then Security, then choose Reset password and follow the link we e-mail you.' },
      external_id: `conv-${i}:turn-${(i % 7) + 1}`,
      metadata: { model: 'gpt-x', locale: 'en' },
      status: 'submitted',
      api_key: 'bench',
      request_id: `seed-${i}`,
      created_at: at,
      updated_at: at,
    });
    responses.push({
      _id: `rsp_bench_${i.toString(36).padStart(8, '0')}`,
      feedback_record_id: id,
      feedback_dataset_id: DATASET,
      user_id: `end-user-${i % 1000}`,
      status: 'submitted',
      values: { helpful: i % 2, ranking: ['answer', 'prompt'] },
      seq: i + 1,
      api_key: 'bench',
      request_id: `seed-${i}`,
      created_at: at,
      updated_at: at,
    });
  }
  return { records, responses };
}

async function seed(db: Db): Promise<number> {
  const started = Date.now();
  const records = db.collection<RecordDoc>(COLLECTIONS.records);
  const responses = db.collection<ResponseDoc>(COLLECTIONS.responses);
  for (let from = 0; from < RECORDS; from += SEED_BATCH) {
    const batch = docs(from, Math.min(RECORDS, from + SEED_BATCH));
    await Promise.all([records.insertMany(batch.records, { ordered: false }), responses.insertMany(batch.responses, { ordered: false })]);
    if ((from / SEED_BATCH) % 20 === 0) log(`seeded ${Math.min(RECORDS, from + SEED_BATCH).toLocaleString('en-US')} records`);
  }
  return (Date.now() - started) / 1000;
}

interface RssProfile<T> {
  readonly result: T;
  readonly peakMb: number;
  /** Peak of the first and of the second half of the run: memory that grows with progress shows here. */
  readonly firstHalfPeakMb: number;
  readonly secondHalfPeakMb: number;
}

/** Samples the API's RSS every 100 ms while `run` runs. */
async function peakRssDuring<T>(pid: number, run: () => Promise<T>): Promise<RssProfile<T>> {
  const samples: { at: number; kb: number }[] = [];
  const started = Date.now();
  const timer = setInterval(() => {
    const kb = rssKb(pid);
    if (Number.isFinite(kb)) samples.push({ at: Date.now() - started, kb });
  }, 100);
  try {
    const result = await run();
    const half = (Date.now() - started) / 2;
    const peak = (list: readonly { kb: number }[]) => list.reduce((m, s) => Math.max(m, s.kb), 0) / 1024;
    return { result, peakMb: peak(samples), firstHalfPeakMb: peak(samples.filter((s) => s.at < half)), secondHalfPeakMb: peak(samples.filter((s) => s.at >= half)) };
  } finally {
    clearInterval(timer);
  }
}

interface ExportRun {
  readonly lines: number;
  readonly bytes: number;
  readonly seconds: number;
  readonly completed: boolean;
}

/** Reads the export; `bytesPerS` throttles by pausing the socket, `maxSeconds` hangs up early. */
function readExport(port: number, options: { bytesPerS?: number; maxSeconds?: number } = {}): Promise<ExportRun> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: `/datasets/${DATASET}/export`, headers: { Authorization: `Bearer ${KEY.secret}` } }, (res) => {
      if (res.statusCode !== 200) {
        reject(new Error(`export answered ${res.statusCode}`));
        res.resume();
        return;
      }
      let lines = 0;
      let bytes = 0;
      let done = false;
      const finish = (completed: boolean) => {
        if (done) return;
        done = true;
        resolve({ lines, bytes, seconds: (Date.now() - started) / 1000, completed });
      };
      res.on('data', (chunk: Buffer) => {
        bytes += chunk.length;
        for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) lines++;
        const elapsed = (Date.now() - started) / 1000;
        if (options.maxSeconds !== undefined && elapsed >= options.maxSeconds) {
          req.destroy();
          finish(false);
          return;
        }
        if (options.bytesPerS !== undefined) {
          // Ahead of the allowed rate: stop reading until the rate catches up.
          const aheadMs = (bytes / options.bytesPerS - elapsed) * 1000;
          if (aheadMs > 0) {
            res.pause();
            setTimeout(() => res.resume(), aheadMs);
          }
        }
      });
      res.on('end', () => finish(true));
      res.on('error', (err) => (done ? undefined : reject(err)));
    });
    req.on('error', (err) => reject(err));
    req.end();
  });
}

async function main(): Promise<void> {
  log('starting Redis and the store (FerretDB v2 on PostgreSQL + DocumentDB)');
  const redis = await startRedis();
  const ferret: ManagedServer = await startFerretDb();
  const client = new MongoClient(ferret.url, { ...mongoClientOptions(), serverSelectionTimeoutMS: 10_000 });
  let api: ReturnType<typeof spawn> | undefined;
  try {
    const db = client.db(DATABASE);
    await ensureIndexes(db);
    log(`seeding ${RECORDS.toLocaleString('en-US')} records and as many responses (insertMany, ${SEED_BATCH} per batch)`);
    const seedSeconds = await seed(db);
    log(`seeded in ${seedSeconds.toFixed(1)} s`);

    const port = await freePort();
    api = spawn(process.execPath, ['--import', 'tsx', 'api/main.ts'], {
      cwd: ROOT,
      stdio: ['ignore', 'ignore', 'inherit'],
      env: {
        PATH: process.env['PATH'] ?? '',
        PORT: String(port),
        HOST: '127.0.0.1',
        REDIS_URL: redis.url,
        MONGODB_URI: `${ferret.url}/${DATABASE}`,
        API_KEYS: `${KEY.name}:${KEY.secret}`,
        READ_API_KEY_NAMES: KEY.name,
        LOG_LEVEL: 'warn',
      },
    });
    const pid = api.pid!;
    await waitForPort(port, 60_000);
    // Warm-up: the first read loads the routes' code paths and the driver's pool.
    await new Promise<void>((resolve, reject) => {
      request({ host: '127.0.0.1', port, path: `/datasets/${DATASET}/records?limit=50`, headers: { Authorization: `Bearer ${KEY.secret}` } }, (res) => res.resume().on('end', () => resolve()))
        .on('error', reject)
        .end();
    });
    const idle = await peakRssDuring(pid, () => new Promise((r) => setTimeout(r, 2_000)));
    log(`API baseline RSS ${idle.peakMb.toFixed(1)} MB`);

    log(`fast reader: the whole export`);
    const fast = await peakRssDuring(pid, () => readExport(port));
    log(`fast reader: ${fast.result.lines.toLocaleString('en-US')} lines, ${(fast.result.bytes / 1e6).toFixed(1)} MB in ${fast.result.seconds.toFixed(1)} s; API peak RSS ${fast.peakMb.toFixed(1)} MB`);
    if (fast.result.lines !== RECORDS) throw new Error(`the export held ${fast.result.lines} lines, not ${RECORDS}`);

    log(`slow reader: ${SLOW_BYTES_PER_S / 1024} KiB/s for ${SLOW_SECONDS} s, then hangs up`);
    const slow = await peakRssDuring(pid, () => readExport(port, { bytesPerS: SLOW_BYTES_PER_S, maxSeconds: SLOW_SECONDS }));
    log(`slow reader: ${slow.result.lines.toLocaleString('en-US')} lines, ${(slow.result.bytes / 1e6).toFixed(1)} MB in ${slow.result.seconds.toFixed(1)} s; API peak RSS ${slow.peakMb.toFixed(1)} MB`);
    const after = await peakRssDuring(pid, () => new Promise((r) => setTimeout(r, 2_000)));

    const stamp = new Date().toISOString().replace(/:/g, '-').replace(/\.\d+Z$/, 'Z');
    const report = [
      `# Export memory (bench/export-memory.ts), ${stamp}`,
      '',
      `Command: \`npm run bench:export -- ${argv.join(' ')}\`; store ${STORE_BACKEND}; ${cpus().length} CPUs, load average ${loadavg()[0]!.toFixed(2)} at the end.`,
      `Seeded ${RECORDS.toLocaleString('en-US')} records + ${RECORDS.toLocaleString('en-US')} responses in ${seedSeconds.toFixed(0)} s.`,
      '',
      '| phase | lines | MB sent | seconds | API peak RSS MB | vs baseline | peak 1st half / 2nd half MB |',
      '|---|---|---|---|---|---|---|',
      `| baseline (idle after a warm-up request) | | | | ${idle.peakMb.toFixed(1)} | 1.00× | |`,
      `| fast reader, whole export | ${fast.result.lines.toLocaleString('en-US')} | ${(fast.result.bytes / 1e6).toFixed(1)} | ${fast.result.seconds.toFixed(1)} | ${fast.peakMb.toFixed(1)} | ${(fast.peakMb / idle.peakMb).toFixed(2)}× | ${fast.firstHalfPeakMb.toFixed(1)} / ${fast.secondHalfPeakMb.toFixed(1)} |`,
      `| slow reader (${SLOW_BYTES_PER_S / 1024} KiB/s, hangs up after ${SLOW_SECONDS} s) | ${slow.result.lines.toLocaleString('en-US')} | ${(slow.result.bytes / 1e6).toFixed(1)} | ${slow.result.seconds.toFixed(1)} | ${slow.peakMb.toFixed(1)} | ${(slow.peakMb / idle.peakMb).toFixed(2)}× | ${slow.firstHalfPeakMb.toFixed(1)} / ${slow.secondHalfPeakMb.toFixed(1)} |`,
      `| idle after both | | | | ${after.peakMb.toFixed(1)} | ${(after.peakMb / idle.peakMb).toFixed(2)}× | |`,
      '',
    ].join('\n');
    const dir = join(ROOT, 'bench', 'results');
    mkdirSync(dir, { recursive: true });
    const file = join(dir, `export-${stamp}.md`);
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
