// `npm run bench:batch`: records per second through POST /feedback-batch versus single
// POST /feedback-record calls, same run, same API process (bench/scenarios/batch.ts). Starts its
// own Redis (AOF everysec, noeviction) and store (only read at start-up, for keys and the order
// floor; no worker runs, the measure is what the API accepts and queues).
//   npm run bench:batch -- [--seconds 10] [--rounds 3] [--batch-size 500] [--single-connections 32] [--batch-connections 4]
import { randomBytes } from 'node:crypto';
import { cpus, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { spawnProc, stopAll } from './lib/procs.js';
import { freePort, startFerretDbServer, startRedisServer, waitForPort } from './lib/services.js';
import { ROOT } from './lib/runner.js';
import { median, runBatchVsSingle } from './scenarios/batch.js';

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '10' },
    rounds: { type: 'string', default: '3' },
    'batch-size': { type: 'string', default: '500' },
    'single-connections': { type: 'string', default: '32' },
    'batch-connections': { type: 'string', default: '4' },
  },
});
const num = (name: keyof typeof values) => {
  const n = Number(values[name]);
  if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} must be a whole number ≥ 1`);
  return n;
};
const log = (line: string) => process.stderr.write(`[bench:batch] ${line}\n`);

async function main(): Promise<void> {
  const [redis, ferret] = await Promise.all([startRedisServer(ROOT), startFerretDbServer(ROOT)]);
  const apiKey = `bench-${randomBytes(12).toString('hex')}`;
  const port = await freePort();
  const batchSize = num('batch-size');
  spawnProc('web', process.execPath, ['--import', 'tsx', 'api/main.ts'], {
    cwd: ROOT,
    env: {
      PATH: process.env['PATH'] ?? '',
      NODE_ENV: 'production',
      HOST: '127.0.0.1',
      PORT: String(port),
      REDIS_URL: redis.url,
      MONGODB_URI: `${ferret.url}/bench_batch`,
      API_KEYS: `bench:${apiKey}`,
      ID_SIGNING_SECRETS: `bench-id-secret-${randomBytes(12).toString('hex')}`,
      LOG_LEVEL: 'warn',
      BATCH_REQUEST_MAX_ITEMS: String(Math.max(500, batchSize)),
      // No worker drains the queue: the backlog ceiling would turn the later rounds into 503s.
      BACKLOG_MAX_JOBS: '100000000',
    },
    onUnexpectedExit: (proc) => {
      log(`the API exited:\n${proc.stderrTail()}`);
      process.exit(1);
    },
  });
  await waitForPort(port, 60_000);
  const load0 = loadavg()[0]!;
  log(`API on :${port}; ${cpus().length} cores, load average ${load0.toFixed(2)} before the run`);
  const rounds = await runBatchVsSingle({
    url: `http://127.0.0.1:${port}`,
    apiKey,
    datasetId: 'ds_bench_batch',
    seconds: num('seconds'),
    rounds: num('rounds'),
    batchSize,
    singleConnections: num('single-connections'),
    batchConnections: num('batch-connections'),
    log,
  });
  const single = median(rounds.filter((r) => r.mode === 'single').map((r) => r.recordsPerSecond));
  const batch = median(rounds.filter((r) => r.mode === 'batch').map((r) => r.recordsPerSecond));
  const failed = rounds.reduce((n, r) => n + r.non2xx + r.errors, 0);
  const summary = {
    single_records_per_s: Math.round(single),
    batch_records_per_s: Math.round(batch),
    ratio: Number((batch / single).toFixed(2)),
    batch_size: batchSize,
    non2xx_or_errors: failed,
    load_average_1m: { before: Number(load0.toFixed(2)), after: Number(loadavg()[0]!.toFixed(2)) },
    cores: cpus().length,
  };
  process.stdout.write(`${JSON.stringify({ summary, rounds }, null, 2)}\n`);
}

main()
  .catch((err: unknown) => {
    log((err as Error).stack ?? String(err));
    process.exitCode = 1;
  })
  .finally(() => stopAll());
