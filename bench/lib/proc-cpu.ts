// CPU of the processes this benchmark started (the store's PostgreSQL and FerretDB, Redis), from
// /proc: a drain the worker does not limit by its own CPU may be limited by theirs.
import { readdirSync, readFileSync } from 'node:fs';

const TICKS_PER_SECOND = 100;

/**
 * CPU seconds (user + system, reaped children included) of every process under this one (FerretDB,
 * Redis) and of the PostgreSQL cluster listening on `postgresPort` (its postmaster is a daemon,
 * found by its `-p` argument), now.
 */
export function storeCpuSeconds(postgresPort: number): number {
  const stats = new Map<number, { ppid: number; ticks: number }>();
  const roots = new Set<number>([process.pid]);
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    let text: string;
    try {
      text = readFileSync(`/proc/${name}/stat`, 'utf8');
    } catch {
      continue; // gone meanwhile
    }
    // The command name may hold spaces and parentheses: the fields start after its last ')'.
    const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
    // f[1] ppid, f[11] utime, f[12] stime, f[13] cutime, f[14] cstime (man 5 proc, counted from field 3).
    stats.set(Number(name), { ppid: Number(f[1]), ticks: Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]) });
    if (f[1] === '1' && text.includes('(postgres)')) {
      const args = (() => {
        try {
          return readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0');
        } catch {
          return [];
        }
      })();
      if (args.includes('-p') && args[args.indexOf('-p') + 1] === String(postgresPort)) roots.add(Number(name));
    }
  }
  let ticks = 0;
  const isDescendant = (pid: number): boolean => {
    for (let p: number | undefined = pid; p !== undefined && p > 1; p = stats.get(p)?.ppid) if (roots.has(p)) return true;
    return false;
  };
  for (const [pid, s] of stats) if (pid !== process.pid && isDescendant(pid)) ticks += s.ticks;
  return ticks / TICKS_PER_SECOND;
}
