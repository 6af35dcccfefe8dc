import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

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

/** `ready` (default: the port accepts connections) says when a started server serves. */
export function managed(port: number, url: string, dir: string, launch: () => ChildProcess, ready: () => Promise<void> = () => waitForPort(port)): ManagedServer {
  let child: ChildProcess | undefined;
  const start = async () => {
    // Starting a running server would launch a duplicate that fails to bind and lose track of the
    // live one, which then outlives the run.
    if (child !== undefined && child.exitCode === null && child.signalCode === null) return;
    child = launch();
    child.stdout?.resume();
    if (process.env['SHOW_SERVER_LOGS']) child.stderr?.pipe(process.stderr); else child.stderr?.resume();
    await ready();
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

const STORE_SCRIPT = fileURLToPath(new URL('../scripts/store.sh', import.meta.url));
const execFileAsync = promisify(execFile);

let storeDirCache: string | undefined;

/**
 * The directory of the local store (scripts/store-build.sh): FI_STORE_DIR, which the test
 * preambles export, else built once (or found in .cache/store/) now.
 */
export function storeDir(): string {
  storeDirCache ??= process.env['FI_STORE_DIR'] ?? execFileSync('bash', [STORE_SCRIPT, 'dir'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim().split('\n').pop()!;
  if (!existsSync(join(storeDirCache, 'ferretdb'))) throw new Error(`the local store is not built at ${storeDirCache}: run "bash scripts/store-build.sh" (npm test does it for you)`);
  return storeDirCache;
}

/** The test run's environment, with FI_STORE_DIR, for scripts/store.sh. */
function storeEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) if (value !== undefined) env[key] = value;
  return { ...env, FI_STORE_DIR: storeDir() };
}

/** A private PostgreSQL cluster with DocumentDB (scripts/store.sh): its own port and temp directory. */
export interface PostgresCluster {
  readonly port: number;
  /** libpq URI of the database `postgres`, where DocumentDB keeps FerretDB's data. */
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
        execFileSync('bash', [STORE_SCRIPT, 'pg-stop', join(dir, 'data')], { stdio: 'ignore', timeout: 30_000, env: storeEnv() });
      } catch {
        // best effort while exiting
      }
      keepServerLog(dir);
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

/** FI_STORE_LOG_DIR set: the cluster's server.log (and any core file) is copied there before its directory goes (to read why a backend died). */
function keepServerLog(dir: string): void {
  const into = process.env['FI_STORE_LOG_DIR'];
  if (into === undefined || into === '') return;
  try {
    mkdirSync(into, { recursive: true });
    copyFileSync(join(dir, 'data', 'server.log'), join(into, `${basename(dir)}.log`));
    // A backend that crashed with core dumps on (`ulimit -c unlimited`, core_pattern `core`) left its core here.
    for (const f of readdirSync(join(dir, 'data'))) if (f.startsWith('core')) copyFileSync(join(dir, 'data', f), join(into, `${basename(dir)}.${f}`));
  } catch {
    // a diagnostic: never fails a run
  }
}

/** Ports a private cluster tries before it gives up: another process may take a free port before PostgreSQL binds it. */
const PG_PORT_ATTEMPTS = 4;

/**
 * Whether pg-start failed because its port was taken meanwhile. The port is free when chosen, but
 * initdb takes seconds before PostgreSQL binds it, and in between an outgoing connection may get it
 * as its ephemeral port, or another server started at the same time (the fault suite starts a Redis
 * Cluster's nodes beside the store, their data and bus ports chosen the same way); a CI run lost a
 * fault scenario to that once (2026-11-27).
 */
function portWasTaken(err: unknown, dataDir: string): boolean {
  if (/is taken/.test((err as { stderr?: string }).stderr ?? '')) return true;
  try {
    return /could not bind|Address already in use/.test(readFileSync(join(dataDir, 'server.log'), 'utf8'));
  } catch {
    return false;
  }
}

/** `choosePort`: where each attempt listens (tests make the first one taken). */
export async function startPostgresCluster(options: { readonly choosePort?: () => Promise<number> } = {}): Promise<PostgresCluster> {
  const choosePort = options.choosePort ?? freePort;
  const env = storeEnv();
  const dir = mkdtempSync(join(tmpdir(), 'fi-postgres-'));
  // As root the cluster runs as an unprivileged user (see lib.sh), which must traverse this directory.
  chmodSync(dir, 0o711);
  installClusterExitHook();
  liveClusters.add(dir);
  let port: number;
  for (let attempt = 1; ; attempt++) {
    port = await choosePort();
    try {
      // A second attempt reuses the data directory: pg-start initialises it only once.
      await execFileAsync('bash', [STORE_SCRIPT, 'pg-start', join(dir, 'data'), String(port)], { timeout: 120_000, env });
      break;
    } catch (err) {
      if (attempt < PG_PORT_ATTEMPTS && portWasTaken(err, join(dir, 'data'))) continue;
      liveClusters.delete(dir);
      rmSync(dir, { recursive: true, force: true });
      throw new Error(`private PostgreSQL did not start: ${(err as { stderr?: string }).stderr ?? (err as Error).message}`, { cause: err });
    }
  }
  return {
    port,
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    async destroy() {
      if (!liveClusters.delete(dir)) return;
      await execFileAsync('bash', [STORE_SCRIPT, 'pg-stop', join(dir, 'data')], { timeout: 60_000, env });
      keepServerLog(dir);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The command that runs FerretDB on the cluster of `pgPort` (scripts/store.sh: one process, FerretDB's own pid). */
export function ferretdbCommand(pgPort: number, port: number, debugPort: number, stateDir: string): { command: string; args: string[]; env: Record<string, string> } {
  return { command: 'bash', args: [STORE_SCRIPT, 'ferretdb', String(pgPort), String(port), String(debugPort), stateDir], env: { ...storeEnv(), FERRETDB_LOG_LEVEL: 'error' } };
}

/** Until GET /debug/readyz on `debugPort` answers 200: FerretDB serves. */
export async function waitForStoreReady(debugPort: number, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await fetch(`http://127.0.0.1:${debugPort}/debug/readyz`).catch(() => undefined);
    if (res?.status === 200) return;
    if (Date.now() > deadline) throw new Error(`FerretDB not ready after ${timeoutMs} ms (debug port ${debugPort})`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The local store: FerretDB v2 on a private PostgreSQL cluster with DocumentDB. */
export interface StoreServer extends ManagedServer {
  /** The cluster under it; stop/start/kill/pause act on FerretDB, destroy on both. */
  readonly postgres: PostgresCluster;
}

/**
 * The store of `npm start` (scripts/lib.sh) on free ports and a temporary directory: FerretDB v2
 * on a private PostgreSQL with DocumentDB. `url` has no database. `wipe()` replaces the cluster
 * by a blank one.
 */
export async function startFerretDb(): Promise<StoreServer> {
  let postgres = await startPostgresCluster();
  try {
    const [port, debugPort] = [await freePort(), await freePort()];
    const stateDir = mkdtempSync(join(tmpdir(), 'fi-ferretdb-'));
    const launch = () => {
      const { command, args, env } = ferretdbCommand(postgres.port, port, debugPort, stateDir);
      return spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], env });
    };
    const server = managed(port, `mongodb://127.0.0.1:${port}`, stateDir, launch, () => waitForStoreReady(debugPort));
    await server.start();
    return {
      ...server,
      get postgres() {
        return postgres;
      },
      async destroy() {
        await server.destroy();
        await postgres.destroy();
      },
      async wipe() {
        await server.kill();
        await postgres.destroy();
        postgres = await startPostgresCluster();
        await server.start();
      },
    };
  } catch (err) {
    await postgres.destroy();
    throw err;
  }
}
