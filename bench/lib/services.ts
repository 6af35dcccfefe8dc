import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ferretdbBinary, freePort, waitForPort } from '../../test/helpers/services.js';
import { registerTempDir, spawnProc, type Proc } from './procs.js';

export { freePort, waitForPort };

export interface Service {
  readonly proc: Proc;
  readonly port: number;
  readonly url: string;
  readonly dir: string;
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

const ferretArgs = (dir: string, port: number) => ['--handler=sqlite', `--sqlite-url=file:${dir}/`, `--listen-addr=127.0.0.1:${port}`, '--debug-addr=-', '--state-dir=-', '--telemetry=disable', '--log-level=error'];

/** FerretDB v1 on SQLite (the MongoDB-wire server of the tests), on its own port and directory. */
export async function startFerretDbServer(cwd: string): Promise<Service> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'fi-bench-ferretdb-'));
  registerTempDir(dir);
  const proc = spawnProc('ferretdb', ferretdbBinary(), ferretArgs(dir, port), { cwd, env: { PATH: process.env['PATH'] ?? '' }, onUnexpectedExit: died });
  await waitForPort(port);
  return { proc, port, url: `mongodb://127.0.0.1:${port}`, dir };
}

/** Kills a server and removes its data (a FerretDB that is still busy for clients that are gone). */
export async function destroyService(service: Service): Promise<void> {
  await service.proc.kill();
  rmSync(service.dir, { recursive: true, force: true });
}
