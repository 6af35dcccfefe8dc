import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ferretdbCommand, freePort, startFerretDb, startPostgresCluster, waitForPort, waitForStoreReady, type PostgresCluster } from '../../devkit/servers.js';
import { registerTempDir, spawnProc, type Proc } from './procs.js';

export { freePort, waitForPort };

export interface Service {
  readonly proc: Proc;
  readonly port: number;
  readonly url: string;
  /** Its data directory (FerretDB: its state directory; the data lives in `postgres`). */
  readonly dir: string;
  /** The private cluster under FerretDB. */
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

/** FerretDB v2 on a private PostgreSQL with DocumentDB (the store of npm start), on its own ports (`onPort`: on that one, a stopped store's). */
export async function startFerretDbServer(cwd: string, onPort?: number): Promise<Service> {
  // Stopped by destroyService, or by the helper's exit hook when the bench ends another way.
  const postgres = await startPostgresCluster();
  const [port, debugPort] = [onPort ?? (await freePort()), await freePort()];
  const dir = mkdtempSync(join(tmpdir(), 'fi-bench-ferretdb-'));
  registerTempDir(dir);
  const { command, args, env } = ferretdbCommand(postgres.port, port, debugPort, dir);
  const proc = spawnProc('ferretdb', command, args, { cwd, env, onUnexpectedExit: died });
  await waitForStoreReady(debugPort);
  return { proc, port, url: `mongodb://127.0.0.1:${port}`, dir, postgres };
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
  /** The port of its PostgreSQL cluster (whose postmaster pg_ctl daemonised: bench/lib/proc-cpu.ts finds it by it). */
  readonly postgresPort: number;
  stop(): Promise<void>;
}

/** The store npm start runs (devkit/servers.ts startFerretDb). */
export async function startTestStore(): Promise<TestStore> {
  const server = await startFerretDb();
  return { backend: STORE_BACKEND, url: server.url, postgresPort: server.postgres.port, stop: () => server.destroy() };
}

/** How reports name the store. */
export const STORE_BACKEND = 'FerretDB v2.5.0 on PostgreSQL 15 + DocumentDB v0.106.0 (private cluster, scripts/store-build.sh)';
