import { execFileSync, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { freePort } from '../../devkit/servers.js';

// What a start script left running, read from /proc: for the tests of npm start and npm run services.

/** A process as /proc shows it; `start` (clock ticks since boot) tells a reused pid apart. */
export interface Proc {
  readonly pid: number;
  readonly start: string;
  readonly command: string;
}

/** pid, ppid, state and start time of every process, from /proc/<pid>/stat. */
function processTable(): Map<number, { ppid: number; state: string; start: string }> {
  const table = new Map<number, { ppid: number; state: string; start: string }>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // The command name (field 2) may hold spaces and parentheses: fields resume after the last ')'.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      table.set(Number(entry), { state: fields[0]!, ppid: Number(fields[1]), start: fields[19]! });
    } catch {
      // exited while we read
    }
  }
  return table;
}

/** Every live descendant of `root`, with its command line. */
export function descendants(root: number): Proc[] {
  const table = processTable();
  const found: Proc[] = [];
  const walk = (parent: number) => {
    for (const [pid, p] of table) {
      if (p.ppid !== parent || p.state === 'Z') continue;
      let command: string;
      try {
        command = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim();
      } catch {
        continue;
      }
      found.push({ pid, start: p.start, command });
      walk(pid);
    }
  };
  walk(root);
  return found;
}

/** Alive: the same process (same start time) still exists and is not a zombie. */
export function alive(proc: Proc): boolean {
  const p = processTable().get(proc.pid);
  return p !== undefined && p.start === proc.start && p.state !== 'Z';
}

/** The postmaster of a PostgreSQL data directory: pg_ctl daemonises it, so it is nobody's descendant. */
export function postmaster(dataDir: string): Proc | undefined {
  const file = join(dataDir, 'postmaster.pid');
  if (!existsSync(file)) return undefined;
  const pid = Number(readFileSync(file, 'utf8').split('\n')[0]);
  const p = processTable().get(pid);
  return p === undefined ? undefined : { pid, start: p.start, command: 'postgres (postmaster)' };
}

export function portAnswers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** What one run of a project script (`npm start`, `npm run services`) may leave behind. */
export interface ScriptRun {
  /** The npm process, started `detached`: its process group is killed. */
  readonly child: ChildProcess | undefined;
  /** LOCAL_RUN_DIR of the run: its private PostgreSQL is stopped and the directory removed. */
  readonly runDir: string | undefined;
  /** Processes the run started, killed if still alive. */
  readonly seen: readonly Proc[];
}

/** Whatever a failed case of a script test left: the npm process group, what it started, the cluster. */
export function cleanUpScriptRun(run: ScriptRun): void {
  const { child, runDir, seen } = run;
  if (child?.pid !== undefined && child.exitCode === null && child.signalCode === null) {
    try {
      process.kill(-child.pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
  for (const proc of seen) if (alive(proc)) process.kill(proc.pid, 'SIGKILL');
  if (runDir !== undefined) {
    if (existsSync(join(runDir, 'postgres', 'postmaster.pid'))) {
      execFileSync('bash', ['scripts/store.sh', 'pg-stop', join(runDir, 'postgres')], { stdio: 'ignore', timeout: 60_000 });
    }
    rmSync(runDir, { recursive: true, force: true });
  }
}

/** A free port for each name, no two the same. */
export async function distinctFreePorts<K extends string>(names: readonly K[]): Promise<Record<K, number>> {
  const ports = {} as Record<K, number>;
  const taken = new Set<number>();
  for (const name of names) {
    let port = await freePort();
    while (taken.has(port)) port = await freePort();
    taken.add(port);
    ports[name] = port;
  }
  return ports;
}

/** What a script run under test exposes to {@link killOneAndExpectStop}. */
export interface RunningScript {
  readonly npm: ChildProcess;
  readonly runDir: string;
  readonly ports: Readonly<Record<string, number>>;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** What the script printed so far (stderr, or both streams). */
  readonly output: () => string;
}

/**
 * SIGKILLs the first descendant of `run` whose command holds `victim`, then expects the script to
 * end by itself within a minute with a failing status and `message` in its output, every process
 * it started (and its private PostgreSQL) gone and every port free. Returns what it watched, for
 * the caller's clean-up.
 */
export async function killOneAndExpectStop(run: RunningScript, victim: string, message: string, waitFor: (check: () => Promise<unknown>, ms: number, what: string) => Promise<unknown>): Promise<Proc[]> {
  const seen = descendants(run.npm.pid!);
  const pg = postmaster(join(run.runDir, 'postgres'));
  if (pg !== undefined) seen.push(pg);
  const target = seen.find((p) => p.command.includes(victim));
  if (target === undefined) throw new Error(`no descendant runs ${victim}: ${JSON.stringify(seen.map((p) => p.command))}`);
  process.kill(target.pid, 'SIGKILL');
  const exit = await Promise.race([run.exited, new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), 60_000).unref())]);
  if (exit === undefined) throw new Error(`still running 60 s after ${victim} died:\n${run.output()}`);
  if (exit.code === 0 || (exit.code === null && exit.signal === null)) throw new Error(`ended with status 0 after ${victim} died:\n${run.output()}`);
  if (!run.output().includes(message)) throw new Error(`no "${message}" in its output:\n${run.output()}`);
  await waitFor(async () => (seen.filter(alive).length === 0 ? true : undefined), 30_000, 'every process it started to be gone').catch(() => {
    throw new Error(`still alive: ${seen.filter(alive).map((p) => `${p.pid} ${p.command}`).join(', ')}`);
  });
  for (const [name, port] of Object.entries(run.ports)) if (await portAnswers(port)) throw new Error(`${name} ${port} still answers`);
  return seen;
}
