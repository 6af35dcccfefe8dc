import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MongoClient } from 'mongodb';
import { createFerretDbPgSetup, psqlRunner } from '../../scripts/ferretdb-pg-setup.js';
import { mongoClientOptions } from '../../shared/mongo.js';
import { ferretdbBinary, freePort, startFerretDb, startPostgresCluster, waitForPort, type PostgresCluster } from '../../test/helpers/services.js';
import { registerTempDir, spawnProc, type Proc } from './procs.js';

export { freePort, waitForPort };

export interface Service {
  readonly proc: Proc;
  readonly port: number;
  readonly url: string;
  /** Its data directory; empty for FerretDB on PostgreSQL, whose data lives in `postgres`. */
  readonly dir: string;
  /** The private cluster under FerretDB on PostgreSQL. */
  readonly postgres?: PostgresCluster;
}

const died = (proc: Proc, code: number | null, signal: NodeJS.Signals | null) => {
  process.stderr.write(`bench: ${proc.name} exited unexpectedly (code ${code ?? '-'}, signal ${signal ?? '-'})\n${proc.stderrTail()}\n`);
};

/**
 * redis-server as production runs it (the tests' `durable` mode): AOF with fsync every second,
 * `noeviction`, no RDB snapshots. Its own port and data directory.
 */
export async function startRedisServer(cwd: string): Promise<Service> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'fi-bench-redis-'));
  registerTempDir(dir);
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'yes', '--appendfsync', 'everysec', '--maxmemory-policy', 'noeviction'];
  const proc = spawnProc('redis-server', process.env['REDIS_SERVER_BIN'] ?? 'redis-server', args, { cwd, env: { PATH: process.env['PATH'] ?? '' }, onUnexpectedExit: died });
  await waitForPort(port);
  return { proc, port, url: `redis://127.0.0.1:${port}`, dir };
}

/**
 * The store under the bench's FerretDB: `postgresql` (default: a private cluster per server, with
 * the GIN indexes of scripts/ferretdb-pg-setup.ts) or `sqlite`, from BENCH_STORE.
 */
type BenchStore = 'postgresql' | 'sqlite';

function benchStore(env: Readonly<Record<string, string | undefined>> = process.env): BenchStore {
  const store = env['BENCH_STORE'] ?? 'postgresql';
  if (store !== 'postgresql' && store !== 'sqlite') throw new Error(`BENCH_STORE must be postgresql or sqlite, not "${store}"`);
  return store;
}

/**
 * The databases bench/run.ts uses (project, raw insertMany, direct baseline): set up before any
 * process connects, so the GIN indexes exist before the first write.
 */
const BENCH_DATABASES = ['bench_project', 'bench_raw', 'bench_direct', 'bench_scale'] as const;

const ferretCommonArgs = (port: number) => [`--listen-addr=127.0.0.1:${port}`, '--debug-addr=-', '--state-dir=-', '--telemetry=disable', '--log-level=error'];

/** FerretDB v1 (the MongoDB-wire server of the tests) on its own port, on BENCH_STORE's store. */
export async function startFerretDbServer(cwd: string, store: BenchStore = benchStore()): Promise<Service> {
  return store === 'sqlite' ? startFerretDbOnSqlite(cwd) : startFerretDbOnPostgres(cwd);
}

async function startFerretDbOnSqlite(cwd: string): Promise<Service> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'fi-bench-ferretdb-'));
  registerTempDir(dir);
  const args = ['--handler=sqlite', `--sqlite-url=file:${dir}/`, ...ferretCommonArgs(port)];
  const proc = spawnProc('ferretdb', ferretdbBinary(), args, { cwd, env: { PATH: process.env['PATH'] ?? '' }, onUnexpectedExit: died });
  await waitForPort(port);
  return { proc, port, url: `mongodb://127.0.0.1:${port}`, dir };
}

async function startFerretDbOnPostgres(cwd: string): Promise<Service> {
  // Stopped by destroyService, or by the helper's exit hook when the bench ends another way.
  const postgres = await startPostgresCluster();
  const port = await freePort();
  const args = ['--handler=postgresql', `--postgresql-url=${postgres.url}`, ...ferretCommonArgs(port)];
  const proc = spawnProc('ferretdb', ferretdbBinary(), args, { cwd, env: { PATH: process.env['PATH'] ?? '' }, onUnexpectedExit: died });
  const url = `mongodb://127.0.0.1:${port}`;
  await waitForPort(port);
  const client = new MongoClient(url, { ...mongoClientOptions(), serverSelectionTimeoutMS: 10_000, retryWrites: false });
  try {
    const setup = createFerretDbPgSetup({ client, sql: psqlRunner(postgres.url) });
    for (const database of BENCH_DATABASES) await setup.setupDatabase(database);
  } finally {
    await client.close();
  }
  return { proc, port, url, dir: '', postgres };
}

/** Kills a server and removes its data (a FerretDB that is still busy for clients that are gone). */
export async function destroyService(service: Service): Promise<void> {
  await service.proc.kill();
  await service.postgres?.destroy();
  if (service.dir !== '') rmSync(service.dir, { recursive: true, force: true });
}

/** A store started by the test helpers, for the benchmarks that run without the service's processes. */
interface TestStore {
  readonly backend: string;
  readonly url: string;
  /** The stand-in's setup step for a database (collections and GIN indexes), before it is written. */
  prepare(database: string): Promise<void>;
  stop(): Promise<void>;
}

/** FerretDB on PostgreSQL with the GIN setup (what npm start runs), or on SQLite with BENCH_STORE=sqlite. */
export async function startTestStore(store: BenchStore = benchStore()): Promise<TestStore> {
  if (store === 'sqlite') {
    const server = await startFerretDb();
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
