// Sustained load: half the project's max accept rate (measured in the same run) for S seconds
// with the worker live, the usual mix. Bursts show that a backlog drains; this shows whether one
// builds up at all when the offered rate is well under the ceiling, i.e. whether the worker keeps
// up with a steady production-like load on the same cores, and what end-to-end lag that costs.
import { runLoad } from '../lib/load.js';
import { bucketQuantile, bucketsDiff } from '../lib/prom.js';
import { basisLabel, fmt } from '../lib/report.js';
import type { SustainedResult } from '../lib/types.js';
import { backlogJobs, checkFatal, drainWithin, mixFor, now, processed, progress, server200s, sleep, waitProjectIdle, workerScrape, type Ctx } from '../lib/runner.js';
import { resetProject } from './seed.js';

/** Share of the max accept rate offered. */
const SUSTAINED_SHARE = 0.5;
/** Bounded: max backlog over the last third of the samples ≤ BOUND_FACTOR × max over the first third + BOUND_SLACK_JOBS. */
const BOUND_FACTOR = 1.5;
const BOUND_SLACK_JOBS = 20;
/** Met also needs this share of the target rate accepted (503 `overloaded` would bound the backlog too). */
const MIN_ACCEPT_SHARE = 0.9;

/** The bounded rule on one series of per-second samples. */
function boundedness(samples: readonly number[]): { firstThirdMax: number; lastThirdMax: number; bounded: boolean } {
  const third = Math.max(1, Math.floor(samples.length / 3));
  const firstThirdMax = Math.max(0, ...samples.slice(0, third));
  const lastThirdMax = Math.max(0, ...samples.slice(samples.length - third));
  return { firstThirdMax, lastThirdMax, bounded: samples.length > 0 && lastThirdMax <= BOUND_FACTOR * firstThirdMax + BOUND_SLACK_JOBS };
}

/** What the offered rate is half of: the API's max accept rate, or the worker's drain rate alone (`--sustained-of`). */
export interface SustainedBasis {
  readonly of: 'accept' | 'store';
  readonly rps: number;
}

export async function runSustained(ctx: Ctx, seconds: number, basis: SustainedBasis): Promise<SustainedResult> {
  const maxAcceptRps = basis.rps;
  await waitProjectIdle(ctx);
  checkFatal();
  const targetRps = maxAcceptRps * SUSTAINED_SHARE;
  const connections = Math.min(ctx.opts.connections, Math.max(1, Math.round(targetRps)));
  const mix = mixFor(ctx, 'bench_sustained');
  progress(`sustained: ${fmt(targetRps)} req/s (half of ${basisLabel(basis.of)}, ${fmt(maxAcceptRps)}) for ${seconds} s from ${connections} connections, worker live`);
  const s0 = await server200s(ctx, 'project');
  const w0 = await workerScrape(ctx);
  const jobs: number[] = [];
  const writes: number[] = [];
  const t0 = now();
  const run = runLoad({ url: `http://127.0.0.1:${ctx.ports.web}`, connections, requests: mix.requests, durationS: seconds, maxS: seconds + 30, rate: targetRps });
  let finished = false;
  const ended = run.done.then(
    () => void (finished = true),
    () => void (finished = true),
  );
  // One sample a second on the bench's own Redis connection, on a schedule fixed from t0 (no
  // drift), and a last one as soon as the load stops: none is taken while the backlog drains after it.
  for (let k = 0; ; k++) {
    checkFatal();
    const last = finished;
    const [j, w] = await Promise.all([backlogJobs(ctx.projectQueue), workerScrape(ctx)]);
    jobs.push(j);
    writes.push(Math.max(0, run.ok() - (processed(w) - processed(w0))));
    if (k > 0 && k % 10 === 0) progress(`  ${k} s: backlog ${fmt(j)} jobs / ${fmt(writes.at(-1))} writes, ${fmt(run.ok())} accepted`);
    if (last) break;
    const wait = t0 + (k + 1) * 1000 - now();
    if (wait > 0) await Promise.race([sleep(wait), ended]);
  }
  const load = await run.done;
  const w1 = await workerScrape(ctx);
  const serverAccepted = (await server200s(ctx, 'project')) - s0;
  const lag = bucketsDiff(w0, w1, 'feedback_worker_lag_seconds');
  const p50 = bucketQuantile(lag, 0.5);
  const p99 = bucketQuantile(lag, 0.99);
  const storeRate = (processed(w1) - processed(w0)) / load.durationS;
  const tDrain = now();
  const drained = await drainWithin(ctx, ctx.opts.drainS);
  const drainTailS = (now() - tDrain) / 1000;
  const b = boundedness(jobs);
  const acceptedRps = load.ok / load.durationS;
  const result: SustainedResult = {
    seconds,
    durationS: load.durationS,
    basisOf: basis.of,
    maxAcceptRps,
    targetRps,
    connections,
    offeredRps: (load.ok + load.non2xx + load.errors) / load.durationS,
    acceptedRps,
    accepted: load.ok,
    serverAccepted,
    non2xx: load.non2xx,
    statusCodes: load.statusCodes,
    errors: load.errors,
    p50Ms: load.latencyMs.p50,
    p99Ms: load.latencyMs.p99,
    backlogJobs: jobs,
    backlogWrites: writes,
    backlogStart: jobs[0] ?? Number.NaN,
    backlogMax: Math.max(0, ...jobs),
    backlogEnd: jobs.at(-1) ?? Number.NaN,
    ...b,
    boundFactor: BOUND_FACTOR,
    boundSlackJobs: BOUND_SLACK_JOBS,
    storeRate,
    lagP50Ms: p50 === undefined ? undefined : p50 * 1000,
    lagP99Ms: p99 === undefined ? undefined : p99 * 1000,
    lagCount: lag.at(-1)?.count ?? 0,
    drained,
    drainTailS,
    met: b.bounded && acceptedRps >= MIN_ACCEPT_SHARE * targetRps,
    minAcceptShare: MIN_ACCEPT_SHARE,
  };
  progress(
    `  sustained: offered ${fmt(result.offeredRps)} req/s, accepted ${fmt(acceptedRps)} req/s (target ${fmt(targetRps)}), non-2xx ${fmt(load.non2xx)} errors ${fmt(load.errors)}, ` +
      `backlog start ${fmt(result.backlogStart)} / max ${fmt(result.backlogMax)} / end ${fmt(result.backlogEnd)} jobs (last third max ${fmt(b.lastThirdMax)} vs first third max ${fmt(b.firstThirdMax)}: ${b.bounded ? 'bounded' : 'GROWING'}), ` +
      `stored ${fmt(storeRate)} writes/s, lag p50 ${fmt(result.lagP50Ms)} ms p99 ${fmt(result.lagP99Ms)} ms; ${drained ? `rest stored ${drainTailS.toFixed(2)} s later` : `NOT DRAINED ${drainTailS.toFixed(0)} s later`}`,
  );
  if (!drained) await resetProject(ctx);
  return result;
}
