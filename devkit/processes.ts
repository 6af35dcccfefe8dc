import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';

/** The repository root: child processes run from there so that `tsx` and the sources resolve. */
const ROOT = resolve(import.meta.dirname, '..');
/** Where logs of child processes are kept after a run (git-ignored). */
export const ARTIFACTS = join(ROOT, 'test-artifacts');

interface LogLine {
  readonly at: number;
  readonly stream: 'stdout' | 'stderr';
  readonly raw: string;
  /** The pino line, parsed; undefined for a line that is not JSON (stack traces, tsx messages). */
  readonly json: Record<string, unknown> | undefined;
}

interface ExitInfo {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  /** Date.now() when the process exited. */
  readonly at: number;
}

/** One `web` or `worker` process of the service, started as production starts it (minus the build). */
export interface ServiceProcess {
  readonly name: string;
  readonly pid: number;
  readonly lines: readonly LogLine[];
  readonly exited: Promise<ExitInfo>;
  alive(): boolean;
  /** Sends a signal; no wait. */
  signal(sig: NodeJS.Signals): void;
  /** Resolves with the first line (already logged or to come) that `match` accepts. */
  waitForLog(match: (line: LogLine) => boolean, timeoutMs: number, what: string): Promise<LogLine>;
  /** SIGKILL and wait for the exit. */
  kill(): Promise<ExitInfo>;
  /** The whole output as text (for artifacts and for searching). */
  text(): string;
}

const PASS_ENV = ['PATH', 'HOME', 'TMPDIR', 'LANG', 'TZ'];

/** Spawns `node --import tsx <entry>` with exactly `env` (plus PATH and friends), capturing every line. */
export function spawnService(name: string, entry: string, env: Readonly<Record<string, string>>): ServiceProcess {
  const fullEnv: Record<string, string> = {};
  for (const k of PASS_ENV) {
    const v = process.env[k];
    if (v !== undefined) fullEnv[k] = v;
  }
  Object.assign(fullEnv, env);
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', entry], { cwd: ROOT, env: fullEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: LogLine[] = [];
  const waiters = new Set<{ match: (l: LogLine) => boolean; resolve: (l: LogLine) => void }>();
  const onLine = (stream: 'stdout' | 'stderr') => (raw: string) => {
    let json: Record<string, unknown> | undefined;
    if (raw.startsWith('{')) {
      try {
        json = JSON.parse(raw) as Record<string, unknown>;
      } catch {
        json = undefined;
      }
    }
    const line: LogLine = { at: Date.now(), stream, raw, json };
    lines.push(line);
    for (const w of waiters) {
      if (w.match(line)) {
        waiters.delete(w);
        w.resolve(line);
      }
    }
  };
  createInterface({ input: child.stdout! }).on('line', onLine('stdout'));
  createInterface({ input: child.stderr! }).on('line', onLine('stderr'));
  let exitInfo: ExitInfo | undefined;
  const exited = new Promise<ExitInfo>((res) => {
    child.once('exit', (code, signal) => {
      exitInfo = { code, signal, at: Date.now() };
      res(exitInfo);
    });
  });
  if (child.pid === undefined) throw new Error(`could not spawn ${name}`);
  const pid = child.pid;

  const proc: ServiceProcess = {
    name,
    pid,
    lines,
    exited,
    alive: () => exitInfo === undefined,
    signal(sig) {
      if (exitInfo === undefined) child.kill(sig);
    },
    waitForLog(match, timeoutMs, what) {
      const found = lines.find(match);
      if (found !== undefined) return Promise.resolve(found);
      return new Promise<LogLine>((res, rej) => {
        const waiter = {
          match,
          resolve: (l: LogLine) => {
            clearTimeout(timer);
            res(l);
          },
        };
        const timer = setTimeout(() => {
          waiters.delete(waiter);
          rej(new Error(`${name}: no log line "${what}" within ${timeoutMs} ms (alive: ${exitInfo === undefined}); last lines:\n${lines.slice(-15).map((l) => l.raw).join('\n')}`));
        }, timeoutMs);
        waiters.add(waiter);
        void exited.then((info) => {
          if (!waiters.has(waiter)) return;
          waiters.delete(waiter);
          clearTimeout(timer);
          rej(new Error(`${name} exited (code ${info.code}, signal ${info.signal}) before logging "${what}"; last lines:\n${lines.slice(-15).map((l) => l.raw).join('\n')}`));
        });
      });
    },
    async kill() {
      if (exitInfo === undefined) child.kill('SIGKILL');
      return exited;
    },
    text: () => lines.map((l) => l.raw).join('\n'),
  };
  return proc;
}

/** A pino message test. */
export const msg = (text: string) => (l: LogLine) => l.json?.['msg'] === text;

/** Writes the output of `procs` under test-artifacts/faults/logs/<label>/ for post-mortems. */
export function saveLogs(label: string, procs: readonly ServiceProcess[]): void {
  const dir = join(ARTIFACTS, 'faults', 'logs', label.replace(/[^A-Za-z0-9_.-]+/g, '_').slice(0, 80));
  mkdirSync(dir, { recursive: true });
  for (const p of procs) writeFileSync(join(dir, `${p.name}-${p.pid}.log`), p.text() + '\n');
}
