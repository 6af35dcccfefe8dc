// The worker alone: it drains the writes the paused project run queued, timed from the queue's
// resume until it is empty; then a bare client's insertMany of the same documents, as the
// store's own rate for the same work.
import type { Mix } from '../lib/load.js';
import { sumOf } from '../lib/prom.js';
import { rawInsertManyRate } from '../lib/raw.js';
import { fmt } from '../lib/report.js';
import type { RawSummary, Round } from '../lib/types.js';
import { cpuDiff, cpuSnap } from '../lib/cpu-use.js';
import { drainWithin, jobsDone, now, processed, progress, workerScrape, type Ctx } from '../lib/runner.js';

/**
 * insertMany commands the raw twin keeps in flight: the worker's jobs in hand (WORKER_CONCURRENCY,
 * up to 256) share one store round at a time, so its store sees few commands at once; hundreds of
 * parallel commands would exceed the stand-in's PostgreSQL connections instead of measuring it.
 */
const RAW_CONCURRENCY = 16;

/** Resumes the paused project queue and times the worker until it is empty (`r.drain`); returns the mean job size. */
export async function drainPaused(ctx: Ctx, r: Round, accepted: number, jobs: number): Promise<number> {
  const w0 = await workerScrape(ctx);
  const c0 = cpuSnap(ctx);
  const t0 = now();
  await ctx.projectQueue.resume();
  const drained = await drainWithin(ctx, ctx.opts.drainS);
  const seconds = (now() - t0) / 1000;
  const c1 = cpuSnap(ctx);
  const w1 = await workerScrape(ctx);
  const writes = processed(w1) - processed(w0);
  const jobCount = Math.max(1, jobsDone(w1) - jobsDone(w0));
  const meanJobSize = writes > 0 ? writes / jobCount : accepted / Math.max(1, jobs);
  const meanJobWriteMs = ((sumOf(w1, 'feedback_worker_write_duration_seconds_sum') - sumOf(w0, 'feedback_worker_write_duration_seconds_sum')) / jobCount) * 1000;
  const cpu = cpuDiff(c0, c1, 'worker', writes);
  r.drain = { drained, expected: accepted, writes, seconds, rate: writes / seconds, meanJobSize, meanJobWriteMs, cpuUsPerWrite: cpu.perUnit };
  if (drained && writes !== accepted) progress(`  WARNING: the worker finished ${fmt(writes)} writes, the API accepted ${fmt(accepted)}`);
  progress(
    `  worker alone: ${fmt(writes)} of ${fmt(accepted)} writes in ${seconds.toFixed(2)} s = ${fmt(r.drain.rate)} writes/s${drained ? '' : ' (NOT DRAINED within --drain)'} ` +
      `(jobs of ${meanJobSize.toFixed(1)}, ${fmt(meanJobWriteMs, 1)} ms of MongoDB writes per job; worker ${fmt(cpu.perUnit['worker'])} µs/write, ferretdb ${fmt(cpu.perUnit['ferretdb'])}, redis ${fmt(cpu.perUnit['redis'])})`,
  );
  return meanJobSize;
}

/** Raw insertMany of the sample write, in batches of the mean job size, right after the drain. */
export async function rawInsertMany(ctx: Ctx, meanJobSize: number | undefined, mix: Mix): Promise<RawSummary | undefined> {
  if (ctx.sampleWrite === undefined) return undefined;
  const raw = await rawInsertManyRate(ctx.rawDb, ctx.sampleWrite, { batch: meanJobSize ?? 100, concurrency: Math.min(ctx.workerConcurrency, RAW_CONCURRENCY), seconds: ctx.opts.rawS, recordShare: mix.recordShare });
  progress(`  raw insertMany: ${fmt(raw.rate)} writes/s (batches of ${raw.batch}, ${raw.concurrency} at a time)`);
  return raw;
}
