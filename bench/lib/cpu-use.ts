// CPU accounting of a benchmark run, from /proc: a snapshot of every process's CPU seconds by role
// (servers with all their processes, Redis, the store with its PostgreSQL backends, the load
// generator) and what a run cost between two snapshots, per unit of work.
import { cpuSeconds, cpuSecondsWithChildren, machineCpu, postmasterPid, runQueueSeconds, treeCpuReader, treeCpuSeconds } from './procs.js';
import type { Ctx } from './runner.js';
import type { Service } from './services.js';
import type { CpuPerRequest } from './types.js';

export interface CpuSnap {
  /** CPU seconds so far by role; a server counts with all its processes (a node:cluster primary and its API processes). */
  readonly per: Record<string, number>;
  /** Seconds each server's main thread has waited for a CPU so far (/proc/<pid>/schedstat). */
  readonly waits: Record<string, number>;
  readonly machine: { busy: number; total: number };
  /** Monotonic clock, s. */
  readonly at: number;
}

/** CPU seconds of a store: FerretDB, and its PostgreSQL (the postmaster and its backends), where the work is done. */
function storeCpuSeconds(store: Service): number {
  const postmaster = store.postgres === undefined ? undefined : postmasterPid(store.postgres.port);
  return cpuSeconds(store.proc.pid) + (postmaster === undefined ? 0 : treeCpuSeconds(postmaster));
}

export function cpuSnap(ctx: Ctx): CpuSnap {
  const tree = treeCpuReader();
  const per: Record<string, number> = { redis: cpuSeconds(ctx.redis.proc.pid), ferretdb: storeCpuSeconds(ctx.ferret), loadgen: cpuSecondsWithChildren(process.pid) };
  const waits: Record<string, number> = {};
  if (ctx.ferretDirect !== undefined) per['ferretdb_direct'] = storeCpuSeconds(ctx.ferretDirect);
  for (const [name, p] of Object.entries(ctx.procs)) {
    if (p === undefined) continue;
    per[name] = tree(p.pid);
    waits[name] = runQueueSeconds(p.pid);
  }
  return { per, waits, machine: machineCpu(), at: Number(process.hrtime.bigint()) / 1e9 };
}

/** What one run cost, from two snapshots around it. */
export interface CpuUse {
  /** CPU µs per unit of work by role (`server` is the process under test). */
  readonly perUnit: CpuPerRequest;
  /** CPU used by processes outside the benchmark, % of the machine. */
  readonly foreignPct: number;
  /** The load generator's CPU (this process and wrk), % of the machine. */
  readonly loadgenPct: number;
  /** Cores the server under test used on average (CPU s / wall s). */
  readonly serverCores: number;
  /** Share of the wall time the server's main thread was runnable but waited for a CPU, %. */
  readonly serverWaitPct: number;
  /** Busy share of the whole machine, %. */
  readonly machineBusyPct: number;
}

export function cpuDiff(a: CpuSnap, b: CpuSnap, serverName: string, units: number, storeName = 'ferretdb'): CpuUse {
  const d: Record<string, number> = {};
  let ours = 0;
  for (const k of Object.keys(b.per)) {
    d[k] = (b.per[k] ?? 0) - (a.per[k] ?? 0);
    ours += d[k];
  }
  const perUnit: CpuPerRequest = {};
  const us = (x: number | undefined) => (units > 0 && x !== undefined ? (x * 1e6) / units : Number.NaN);
  perUnit['server'] = us(d[serverName]);
  perUnit['redis'] = us(d['redis']);
  perUnit['ferretdb'] = us(d[storeName]);
  perUnit['worker'] = us(d['worker']);
  perUnit['loadgen'] = us(d['loadgen']);
  const busy = b.machine.busy - a.machine.busy;
  const total = b.machine.total - a.machine.total;
  const wall = b.at - a.at;
  const pct = (x: number) => (total > 0 ? (x / total) * 100 : Number.NaN);
  return {
    perUnit,
    foreignPct: pct(Math.max(0, busy - ours)),
    loadgenPct: pct(d['loadgen'] ?? 0),
    serverCores: wall > 0 ? (d[serverName] ?? Number.NaN) / wall : Number.NaN,
    serverWaitPct: wall > 0 ? (((b.waits[serverName] ?? Number.NaN) - (a.waits[serverName] ?? Number.NaN)) / wall) * 100 : Number.NaN,
    machineBusyPct: pct(busy),
  };
}
