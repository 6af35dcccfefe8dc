// Process scaling on one host: the accept rate of the API with WEB_CONCURRENCY=2 against 1, and
// the drain rate of 2 worker processes against 1, in the same run, alternating within each
// round. Records only (each write a record and its first response), so the drain never waits on
// records of another database. What limits the ratios on a small machine is in the report: the
// CPU share of the API processes, the load generator, Redis and FerretDB/PostgreSQL per run.
import { cpus, loadavg } from 'node:os';
import { Queue } from 'bullmq';
import { runWrk } from '../lib/wrk.js';
import { runLoad } from '../lib/load.js';
import { cpuSeconds, cpuSecondsWithChildren, machineCpu, postmasterPid, treeCpuSeconds, type Proc } from '../lib/procs.js';
import { fmt, median } from '../lib/report.js';
import { freePort, waitForPort } from '../lib/services.js';
import type { ScaleResult, ScaleRun } from '../lib/types.js';
import { backlogJobs, checkFatal, mixFor, now, progress, sleep, until, type Ctx } from '../lib/runner.js';

const QUEUE = 'bench-scale';
const DATABASE = 'bench_scale';

interface Usage {
  readonly machineBusyPct: number;
  /** % of the whole machine (all cores) per role. */
  readonly pct: Record<string, number>;
}

/** CPU of the roles over a window, as shares of the whole machine. */
function usageMeter(roles: Record<string, () => number>): () => Usage {
  const read = () => ({ machine: machineCpu(), per: Object.fromEntries(Object.entries(roles).map(([k, f]) => [k, f()])) });
  const a = read();
  return () => {
    const b = read();
    const total = b.machine.total - a.machine.total;
    const pct: Record<string, number> = {};
    for (const k of Object.keys(roles)) pct[k] = total > 0 ? (((b.per[k] ?? 0) - (a.per[k] ?? 0)) / total) * 100 : Number.NaN;
    return { machineBusyPct: total > 0 ? ((b.machine.busy - a.machine.busy) / total) * 100 : Number.NaN, pct };
  };
}

export async function runScale(ctx: Ctx, seconds: number, rounds: number): Promise<ScaleResult> {
  checkFatal();
  const loadavgStart = loadavg();
  const ports = { 1: await freePort(), 2: await freePort() } as const;
  const env = (n: 1 | 2) => ({ QUEUE_NAME: QUEUE, MONGODB_URI: `${ctx.ferret.url}/${DATABASE}`, PORT: String(ports[n]), WEB_CONCURRENCY: String(n) });
  const webs: Record<1 | 2, Proc> = { 1: ctx.spawnProject('scale_web1', 'dist/api/main.js', env(1)), 2: ctx.spawnProject('scale_web2', 'dist/api/main.js', env(2)) };
  const queue = new Queue(QUEUE, { connection: { host: '127.0.0.1', port: ctx.redis.port } });
  const runs: ScaleRun[] = [];
  try {
    for (const n of [1, 2] as const) {
      await waitForPort(ports[n], 60_000);
      await until(`scale_web${n} ready`, 30_000, 200, async () => ((await fetch(`http://127.0.0.1:${ports[n]}/readyz`).catch(() => undefined))?.status === 200 ? true : undefined));
    }
    await queue.pause();
    const postgres = ctx.ferret.postgres === undefined ? undefined : postmasterPid(ctx.ferret.postgres.port);
    // The store is FerretDB plus, on PostgreSQL, the postmaster and its backends.
    const common = { redis: () => cpuSeconds(ctx.redis.proc.pid), store: () => cpuSeconds(ctx.ferret.proc.pid) + (postgres === undefined ? 0 : treeCpuSeconds(postgres)), loadgen: () => cpuSecondsWithChildren(process.pid) };
    progress(`scale: ${rounds} round(s); accept ${seconds} s with WEB_CONCURRENCY=1 and =2, then the writes queued by each drained by as many worker processes`);
    for (let round = 1; round <= rounds; round++) {
      const order: (1 | 2)[] = round % 2 === 1 ? [1, 2] : [2, 1];
      for (const n of order) {
        checkFatal();
        await sleep(500);
        const web = webs[n];
        const mix = mixFor(ctx, `bench_scale_r${round}_p${n}`, 0);
        const url = `http://127.0.0.1:${ports[n]}`;
        const meter = usageMeter({ ...common, api: () => treeCpuSeconds(web.pid) });
        const jobs0 = await backlogJobs(queue);
        const run =
          ctx.opts.loadgen === 'wrk'
            ? runWrk({ url, connections: ctx.opts.connections, headers: mix.headers, requests: mix.fixed, durationS: seconds })
            : runLoad({ url, connections: ctx.opts.connections, requests: mix.requests, durationS: seconds, maxS: seconds + 30 });
        const load = await run.done;
        const accept = meter();
        runs.push({ kind: 'accept', processes: n, round, count: load.ok, seconds: load.durationS, rate: load.rps, p99Ms: load.latencyMs.p99, non2xx: load.non2xx + load.errors, machineBusyPct: accept.machineBusyPct, cpuPct: accept.pct });
        progress(`  scale accept, ${n} API process(es): ${fmt(load.rps)} req/s, p99 ${load.latencyMs.p99.toFixed(1)} ms, non-2xx+errors ${fmt(load.non2xx + load.errors)}; CPU % of the machine: api ${fmt(accept.pct['api'])} loadgen ${fmt(accept.pct['loadgen'])} redis ${fmt(accept.pct['redis'])} (machine busy ${fmt(accept.machineBusyPct)}%)`);

        // The writes just queued, drained by n worker processes started for it.
        await sleep(300);
        const jobs = (await backlogJobs(queue)) - jobs0;
        const metricsPorts = await Promise.all(Array.from({ length: n }, () => freePort()));
        const workers = metricsPorts.map((p, i) => ctx.spawnProject(`scale_worker${i + 1}`, 'dist/worker/main.js', { QUEUE_NAME: QUEUE, MONGODB_URI: `${ctx.ferret.url}/${DATABASE}`, PORT: '0', WORKER_METRICS_PORT: String(p) }));
        try {
          await Promise.all(metricsPorts.map((p) => waitForPort(p, 60_000)));
          const drainMeter = usageMeter({ ...common, workers: () => workers.reduce((s, w) => s + cpuSeconds(w.pid), 0) });
          const t0 = now();
          await queue.resume();
          const drained = await until(`the scale queue to drain (${n} worker(s))`, ctx.opts.burstDrainS * 1000, 100, async () => ((await backlogJobs(queue)) === 0 ? true : undefined)).catch(() => false);
          const s = (now() - t0) / 1000;
          await queue.pause();
          const drain = drainMeter();
          runs.push({ kind: 'drain', processes: n, round, count: load.ok, seconds: s, rate: drained ? load.ok / s : Number.NaN, jobs, drained, machineBusyPct: drain.machineBusyPct, cpuPct: drain.pct });
          progress(`  scale drain, ${n} worker process(es): ${drained ? `${fmt(load.ok / s)} writes/s (${fmt(load.ok)} writes in ${fmt(jobs)} jobs, ${s.toFixed(1)} s)` : `NOT DRAINED in ${s.toFixed(0)} s`}; CPU % of the machine: workers ${fmt(drain.pct['workers'])} store ${fmt(drain.pct['store'])} redis ${fmt(drain.pct['redis'])} (machine busy ${fmt(drain.machineBusyPct)}%)`);
          if (!drained) await queue.obliterate({ force: true });
        } finally {
          await Promise.all(workers.map((w) => w.stop(10_000)));
        }
      }
    }
  } finally {
    await queue.obliterate({ force: true }).catch(() => undefined);
    await queue.close();
    await Promise.all([webs[1].stop(10_000), webs[2].stop(10_000)]);
    await ctx.mongo.db(DATABASE).dropDatabase().catch(() => undefined);
  }
  const ratio = (kind: ScaleRun['kind']) =>
    Array.from({ length: rounds }, (_, i) => {
      const one = runs.find((r) => r.kind === kind && r.round === i + 1 && r.processes === 1)?.rate;
      const two = runs.find((r) => r.kind === kind && r.round === i + 1 && r.processes === 2)?.rate;
      return one === undefined || two === undefined || !(one > 0) ? undefined : two / one;
    });
  const acceptPerRound = ratio('accept');
  const drainPerRound = ratio('drain');
  const result: ScaleResult = {
    seconds,
    rounds,
    cpus: cpus().length,
    loadavgStart: loadavgStart.map((x) => Number(x.toFixed(2))),
    loadavgEnd: loadavg().map((x) => Number(x.toFixed(2))),
    runs,
    acceptRatioPerRound: acceptPerRound,
    drainRatioPerRound: drainPerRound,
    acceptRatio: median(acceptPerRound),
    drainRatio: median(drainPerRound),
  };
  progress(`scale: accept 2/1 processes ${fmt(result.acceptRatio, 2)} (${acceptPerRound.map((x) => fmt(x, 2)).join(', ')}), drain 2/1 workers ${fmt(result.drainRatio, 2)} (${drainPerRound.map((x) => fmt(x, 2)).join(', ')}); load average ${result.loadavgStart.join(' ')} → ${result.loadavgEnd.join(' ')}`);
  return result;
}
