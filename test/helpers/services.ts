import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { MongoClient } from 'mongodb';
import { mongoClientOptions } from '../../shared/mongo.js';
import { createFerretDbPgSetup, psqlRunner, type SetupReport } from '../../scripts/ferretdb-pg-setup.js';

/** A free TCP port on loopback (the OS picks it; tiny race with other processes accepted). */
export async function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const srv = createServer();
    srv.once('error', rej);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr !== null ? addr.port : 0;
      srv.close(() => res(port));
    });
  });
}

export async function waitForPort(port: number, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const ok = await new Promise<boolean>((res) => {
      const sock = connect(port, '127.0.0.1');
      sock.once('connect', () => {
        sock.destroy();
        res(true);
      });
      sock.once('error', () => res(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`nothing listens on port ${port} after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function waitExit(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((res) => child.once('exit', () => res()));
}

export interface ManagedServer {
  readonly port: number;
  readonly url: string;
  /** Starts it again on the same port with the same data. */
  start(): Promise<void>;
  /** SIGTERM and wait. */
  stop(): Promise<void>;
  /** SIGKILL and wait. */
  kill(): Promise<void>;
  /** SIGSTOP: connections stay open and every request hangs until {@link resume}. */
  pause(): void;
  /** SIGCONT after {@link pause}. */
  resume(): void;
  /** Stops it and removes its data. */
  destroy(): Promise<void>;
  /** Stops it, removes its data and starts an empty one on the same port (a new, blank server). */
  wipe(): Promise<void>;
}

export function managed(port: number, url: string, dir: string, launch: () => ChildProcess): ManagedServer {
  let child: ChildProcess | undefined;
  const start = async () => {
    // Starting a running server would launch a duplicate that fails to bind and lose track of the
    // live one, which then outlives the run.
    if (child !== undefined && child.exitCode === null && child.signalCode === null) return;
    child = launch();
    child.stdout?.resume();
    if (process.env['SHOW_SERVER_LOGS']) child.stderr?.pipe(process.stderr); else child.stderr?.resume();
    await waitForPort(port);
  };
  const signal = async (sig: NodeJS.Signals) => {
    const c = child;
    child = undefined;
    if (c === undefined) return;
    c.kill(sig);
    await waitExit(c);
  };
  return {
    port,
    url,
    start,
    stop: () => signal('SIGTERM'),
    kill: () => signal('SIGKILL'),
    pause: () => child?.kill('SIGSTOP'),
    resume: () => child?.kill('SIGCONT'),
    async destroy() {
      await signal('SIGTERM');
      rmSync(dir, { recursive: true, force: true });
    },
    async wipe() {
      await signal('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
      mkdirSync(dir, { recursive: true });
      await start();
    },
  };
}

/**
 * A redis-server of our own on a free port. `durable` runs it as production must (AOF everysec,
 * noeviction), so a restart keeps the queue.
 */
export async function startRedis(options: { durable?: boolean; maxmemoryPolicy?: string } = {}): Promise<ManagedServer> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'fi-redis-'));
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', ''];
  args.push(...(options.durable ? ['--appendonly', 'yes', '--appendfsync', 'everysec'] : ['--appendonly', 'no']));
  args.push('--maxmemory-policy', options.maxmemoryPolicy ?? 'noeviction');
  const server = managed(port, `redis://127.0.0.1:${port}`, dir, () => spawn(process.env['REDIS_SERVER_BIN'] ?? 'redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] }));
  await server.start();
  return server;
}

export function ferretdbBinary(): string {
  const bin = process.env['FERRETDB_BIN'] ?? resolve('.cache/ferretdb/ferretdb-v1.24.2');
  if (!existsSync(bin)) throw new Error(`FerretDB binary not found at ${bin}: run "bash scripts/ferretdb-build.sh" (npm test does it for you)`);
  return bin;
}

const PG_CLUSTER_SCRIPT = fileURLToPath(new URL('../../scripts/pg-cluster.sh', import.meta.url));
const execFileAsync = promisify(execFile);

/** A private PostgreSQL cluster (scripts/pg-cluster.sh): its own port, temp directory and database `ferretdb`. */
export interface PostgresCluster {
  readonly port: number;
  /** libpq URI of the database `ferretdb`, as FerretDB's --postgresql-url wants it. */
  readonly url: string;
  /** pg_ctl -m fast stop, then removes its data. */
  destroy(): Promise<void>;
}

/** Data directories of clusters still running, stopped on process exit if nobody destroyed them. */
const liveClusters = new Set<string>();
let exitHookInstalled = false;

function installClusterExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  // pg_ctl daemonises the postmaster: unlike a child process, it would outlive a run that dies.
  process.once('exit', () => {
    for (const dir of liveClusters) {
      try {
        execFileSync('bash', [PG_CLUSTER_SCRIPT, 'stop', join(dir, 'data')], { stdio: 'ignore', timeout: 30_000 });
      } catch {
        // best effort while exiting
      }
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

export async function startPostgresCluster(): Promise<PostgresCluster> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'fi-postgres-'));
  // As root the cluster runs as an unprivileged user (see lib.sh), which must traverse this directory.
  chmodSync(dir, 0o711);
  installClusterExitHook();
  liveClusters.add(dir);
  try {
    await execFileAsync('bash', [PG_CLUSTER_SCRIPT, 'start', join(dir, 'data'), String(port)], { timeout: 120_000 });
  } catch (err) {
    liveClusters.delete(dir);
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`private PostgreSQL did not start: ${(err as { stderr?: string }).stderr ?? (err as Error).message}`, { cause: err });
  }
  return {
    port,
    url: `postgres://postgres@127.0.0.1:${port}/ferretdb`,
    async destroy() {
      if (!liveClusters.delete(dir)) return;
      await execFileAsync('bash', [PG_CLUSTER_SCRIPT, 'stop', join(dir, 'data')], { timeout: 60_000 });
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** FerretDB on a private PostgreSQL cluster; stop/start/kill act on FerretDB, destroy on both. */
export interface PostgresFerretDb extends ManagedServer {
  readonly postgres: PostgresCluster;
  /** Creates the project's collections in `database` and their GIN indexes (scripts/ferretdb-pg-setup.ts). */
  setupDatabase(database: string): Promise<SetupReport>;
  /** GIN indexes for every collection `database` has now (after a worker created its own). */
  indexDatabase(database: string): Promise<string[]>;
}

interface FerretDbOptions {
  /** Where FerretDB stores: `sqlite` (default, a temp directory) or `postgresql` (a private cluster per call). */
  backend?: 'sqlite' | 'postgresql';
}

const ferretCommonArgs = (port: number) => [`--listen-addr=127.0.0.1:${port}`, '--debug-addr=-', '--state-dir=-', '--telemetry=disable', '--log-level=error'];

/** FerretDB v1 on SQLite in a temporary directory, or on a private PostgreSQL cluster, on a free port. `url` has no database. */
export async function startFerretDb(options?: FerretDbOptions & { backend?: 'sqlite' }): Promise<ManagedServer>;
export async function startFerretDb(options: FerretDbOptions & { backend: 'postgresql' }): Promise<PostgresFerretDb>;
export async function startFerretDb(options: FerretDbOptions = {}): Promise<ManagedServer | PostgresFerretDb> {
  if (options.backend === 'postgresql') return startFerretDbOnPostgres();
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'fi-ferretdb-'));
  const args = ['--handler=sqlite', `--sqlite-url=file:${dir}/`, ...ferretCommonArgs(port)];
  const server = managed(port, `mongodb://127.0.0.1:${port}`, dir, () => spawn(ferretdbBinary(), args, { stdio: ['ignore', 'pipe', 'pipe'] }));
  await server.start();
  return server;
}

async function startFerretDbOnPostgres(): Promise<PostgresFerretDb> {
  const postgres = await startPostgresCluster();
  try {
    const port = await freePort();
    const args = ['--handler=postgresql', `--postgresql-url=${postgres.url}`, ...ferretCommonArgs(port)];
    const url = `mongodb://127.0.0.1:${port}`;
    const server = managed(port, url, '', () => spawn(ferretdbBinary(), args, { stdio: ['ignore', 'pipe', 'pipe'] }));
    await server.start();
    const withSetup = async <T>(run: (setup: ReturnType<typeof createFerretDbPgSetup>) => Promise<T>): Promise<T> => {
      const client = new MongoClient(url, { ...mongoClientOptions(), serverSelectionTimeoutMS: 10_000, retryWrites: false });
      try {
        return await run(createFerretDbPgSetup({ client, sql: psqlRunner(postgres.url) }));
      } finally {
        await client.close();
      }
    };
    return {
      ...server,
      postgres,
      setupDatabase: (database) => withSetup((setup) => setup.setupDatabase(database)),
      indexDatabase: (database) => withSetup((setup) => setup.indexDatabase(database)),
      async destroy() {
        await server.stop();
        await postgres.destroy();
      },
    };
  } catch (err) {
    await postgres.destroy();
    throw err;
  }
}
