import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readdirSync, readFileSync, rmSync } from 'node:fs';

/** A child process the benchmark started; every one is killed when the benchmark ends, however it ends. */
export interface Proc {
  readonly name: string;
  readonly pid: number;
  readonly child: ChildProcess;
  /** The last lines it wrote to stderr (for error messages). */
  stderrTail(): string;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves when it has exited. */
  stop(graceMs?: number): Promise<void>;
  /** SIGKILL; resolves when it has exited. */
  kill(): Promise<void>;
  exited(): boolean;
}

const procs = new Set<Proc>();
const tempDirs = new Set<string>();

export function registerTempDir(dir: string): void {
  tempDirs.add(dir);
}

function waitExit(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((res) => child.once('exit', () => res()));
}

interface SpawnOptions {
  readonly env: Record<string, string>;
  readonly cwd: string;
  /** Where stdout goes: a file path, or /dev/null (default). */
  readonly stdoutFile?: string;
  /** Called when the process exits while nobody asked it to stop. */
  readonly onUnexpectedExit?: (proc: Proc, code: number | null, signal: NodeJS.Signals | null) => void;
}

export function spawnProc(name: string, command: string, args: readonly string[], options: SpawnOptions): Proc {
  const outFd = openSync(options.stdoutFile ?? '/dev/null', 'a');
  let child: ChildProcess;
  try {
    child = spawn(command, [...args], { cwd: options.cwd, env: options.env, stdio: ['ignore', outFd, 'pipe'] });
  } finally {
    closeSync(outFd);
  }
  if (child.pid === undefined) throw new Error(`could not start ${name} (${command})`);
  const tail: string[] = [];
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (chunk: string) => {
    for (const line of chunk.split('\n')) if (line.trim() !== '') tail.push(line);
    if (tail.length > 40) tail.splice(0, tail.length - 40);
  });
  let stopping = false;
  const proc: Proc = {
    name,
    pid: child.pid,
    child,
    stderrTail: () => tail.join('\n'),
    exited: () => child.exitCode !== null || child.signalCode !== null,
    async stop(graceMs = 5_000) {
      stopping = true;
      if (proc.exited()) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await waitExit(child);
      clearTimeout(timer);
      procs.delete(proc);
    },
    async kill() {
      stopping = true;
      if (!proc.exited()) {
        child.kill('SIGKILL');
        await waitExit(child);
      }
      procs.delete(proc);
    },
  };
  child.once('exit', (code, signal) => {
    if (!stopping) options.onUnexpectedExit?.(proc, code, signal);
  });
  procs.add(proc);
  return proc;
}

/** Stops every process still running, newest first (servers before the stores they use). */
export async function stopAll(graceMs = 5_000): Promise<void> {
  const list = [...procs].reverse();
  for (const p of list) await p.stop(graceMs).catch(() => undefined);
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
  tempDirs.clear();
}

/** For process 'exit' handlers, which cannot wait: SIGKILL whatever is left and remove temp dirs. */
export function killAllSync(): void {
  for (const p of procs) {
    if (!p.exited()) {
      try {
        process.kill(p.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  }
  procs.clear();
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
  tempDirs.clear();
}

// ---- /proc readings -------------------------------------------------------------------------

/** Clock ticks per second of /proc/<pid>/stat (USER_HZ; 100 on Linux builds we know of). */
const CLK_TCK = 100;

/** CPU seconds (user + system) a process has used so far, or NaN when it cannot be read. */
export function cpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // After "pid (comm) ", field 3 (state) is index 0; utime is field 14, stime field 15.
    return (Number(fields[11]) + Number(fields[12])) / CLK_TCK;
  } catch {
    return Number.NaN;
  }
}

/**
 * CPU seconds of a process plus those of its children that have exited and been waited for
 * (cutime, cstime): the benchmark's own CPU together with each finished wrk run.
 */
export function cpuSecondsWithChildren(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14])) / CLK_TCK;
  } catch {
    return Number.NaN;
  }
}

/**
 * Seconds the process's main thread has spent runnable but waiting for a CPU (the second field
 * of /proc/<pid>/schedstat, ns), or NaN without schedstats. The JavaScript of a Node server runs
 * on that thread, so this is how long the server wanted a core and did not get one.
 */
export function runQueueSeconds(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/schedstat`, 'utf8').trim().split(/\s+/);
    return Number(fields[1]) / 1e9;
  } catch {
    return Number.NaN;
  }
}

/** Resident set size in kB (VmRSS), or NaN. */
export function rssKb(pid: number): number {
  try {
    const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m === null ? Number.NaN : Number(m[1]);
  } catch {
    return Number.NaN;
  }
}

/** Busy and total CPU seconds of the whole machine (all cores), from /proc/stat. */
export function machineCpu(): { busy: number; total: number } {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '';
    const v = line.trim().split(/\s+/).slice(1).map(Number);
    const total = v.slice(0, 8).reduce((a, b) => a + b, 0);
    const idle = (v[3] ?? 0) + (v[4] ?? 0);
    return { busy: (total - idle) / CLK_TCK, total: total / CLK_TCK };
  } catch {
    return { busy: Number.NaN, total: Number.NaN };
  }
}

/** pid → [parent pid, own CPU seconds + that of its waited-for children] of every process now. */
function processTable(): Map<number, { ppid: number; cpu: number }> {
  const table = new Map<number, { ppid: number; cpu: number }>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      table.set(Number(name), { ppid: Number(f[1]), cpu: (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) / CLK_TCK });
    } catch {
      // exited meanwhile
    }
  }
  return table;
}

/**
 * CPU seconds of a process and all its descendants, live or exited and waited for: a
 * node:cluster primary with its API processes, a PostgreSQL postmaster with its backends.
 */
export function treeCpuSeconds(pid: number): number {
  return treeCpuReader()(pid);
}

/**
 * {@link treeCpuSeconds} of any number of processes from one reading of the process table (one
 * pass over /proc per snapshot, not one per process).
 */
export function treeCpuReader(): (pid: number) => number {
  const table = processTable();
  return (pid) => treeCpuOf(table, pid);
}

function treeCpuOf(table: Map<number, { ppid: number; cpu: number }>, pid: number): number {
  if (!table.has(pid)) return Number.NaN;
  const children = new Map<number, number[]>();
  for (const [p, { ppid }] of table) children.set(ppid, [...(children.get(ppid) ?? []), p]);
  let sum = 0;
  const stack = [pid];
  while (stack.length > 0) {
    const p = stack.pop()!;
    sum += table.get(p)?.cpu ?? 0;
    stack.push(...(children.get(p) ?? []));
  }
  return sum;
}

/** The pid of the PostgreSQL postmaster listening on `port` (its command line has `-p <port>`), if any. */
export function postmasterPid(port: number): number | undefined {
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const args = readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0');
      const p = args.indexOf('-p');
      if (args[0]?.endsWith('postgres') === true && p > 0 && args[p + 1] === String(port)) return Number(name);
    } catch {
      // exited meanwhile
    }
  }
  return undefined;
}
