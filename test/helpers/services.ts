import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

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
}

function managed(port: number, url: string, dir: string, launch: () => ChildProcess): ManagedServer {
  let child: ChildProcess | undefined;
  const start = async () => {
    // Starting a running server would launch a duplicate that fails to bind and lose track of the
    // live one, which then outlives the run.
    if (child !== undefined && child.exitCode === null && child.signalCode === null) return;
    child = launch();
    child.stdout?.resume();
    child.stderr?.resume();
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

/** FerretDB v1 on SQLite in a temporary directory, on a free port. `url` has no database. */
export async function startFerretDb(): Promise<ManagedServer> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'fi-ferretdb-'));
  const args = [
    '--handler=sqlite',
    `--sqlite-url=file:${dir}/`,
    `--listen-addr=127.0.0.1:${port}`,
    '--debug-addr=-',
    '--state-dir=-',
    '--telemetry=disable',
    '--log-level=error',
  ];
  const server = managed(port, `mongodb://127.0.0.1:${port}`, dir, () => spawn(ferretdbBinary(), args, { stdio: ['ignore', 'pipe', 'pipe'] }));
  await server.start();
  return server;
}
