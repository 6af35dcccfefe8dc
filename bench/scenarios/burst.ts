// Bursts: a fixed number of records from many connections, until every 200 is stored; checks
// exactly-once storage, the drain time and the API's memory.
import { COLLECTIONS } from '../../shared/mongo.js';
import { runLoad } from '../lib/load.js';
import { rssKb } from '../lib/procs.js';
import { fmt } from '../lib/report.js';
import type { BurstResult } from '../lib/types.js';
import { backlogJobs, checkFatal, mixFor, now, processed, progress, server200s, sleep, usedMemory, waitProjectIdle, workerScrape, type Ctx } from '../lib/runner.js';
import { resetProject } from './seed.js';

export async function runBurst(ctx: Ctx, size: number, index: number): Promise<BurstResult> {
  await waitProjectIdle(ctx);
  checkFatal();
  const web = ctx.procs.web!;
  const worker = ctx.procs.worker!;
  const dataset = `bench_burst_${index}_${size}`;
  const mix = mixFor(ctx, dataset, 0);
  const deadLetters = ctx.projectDb.collection(COLLECTIONS.deadLetters);
  const dl0 = await deadLetters.countDocuments({});
  const s0 = await server200s(ctx, 'project');
  const w0 = await workerScrape(ctx);
  const apiRss = { before: rssKb(web.pid), peak: rssKb(web.pid), after: Number.NaN };
  const workerRss = { before: rssKb(worker.pid), peak: rssKb(worker.pid), after: Number.NaN };
  let peakWrites = 0;
  let peakJobs = 0;
  let redisPeak = 0;
  let stored: number;
  const t0 = now();
  progress(`burst ${index + 1}: ${fmt(size)} records from ${ctx.opts.burstConnections} connections`);
  const run = runLoad({ url: `http://127.0.0.1:${ctx.ports.web}`, connections: ctx.opts.burstConnections, requests: mix.requests, amount: size, maxS: Math.max(120, size / 200), timeoutS: 30 });
  let acceptedAt: number | undefined;
  void run.done.then(
    () => (acceptedAt = now()),
    () => (acceptedAt = now()),
  );
  let lastLog = now();
  let target = Number.POSITIVE_INFINITY;
  let drained = false;
  // Samples until the load is over and the worker has finished as many writes as the API
  // accepted, or the drain budget (counted from the last answer) is spent.
  for (;;) {
    checkFatal();
    const [jobs, w, mem] = await Promise.all([backlogJobs(ctx.projectQueue), workerScrape(ctx), usedMemory(ctx.redisClient)]);
    stored = processed(w) - processed(w0);
    peakJobs = Math.max(peakJobs, jobs);
    peakWrites = Math.max(peakWrites, run.ok() - stored);
    redisPeak = Math.max(redisPeak, mem);
    apiRss.peak = Math.max(apiRss.peak, rssKb(web.pid));
    workerRss.peak = Math.max(workerRss.peak, rssKb(worker.pid));
    if (acceptedAt !== undefined && target === Number.POSITIVE_INFINITY) target = (await server200s(ctx, 'project')) - s0;
    if (stored >= target && jobs === 0) {
      drained = true;
      break;
    }
    if (acceptedAt !== undefined && now() - acceptedAt > ctx.opts.burstDrainS * 1000) break;
    if (now() - lastLog > 5000) {
      lastLog = now();
      progress(`  ${acceptedAt === undefined ? 'accepting' : 'draining'}: ${fmt(run.ok())} accepted, ${fmt(stored)} stored, ${fmt(jobs)} jobs waiting, API RSS ${fmt(rssKb(web.pid) / 1024)} MB`);
    }
    await sleep(acceptedAt === undefined ? 250 : 50);
  }
  const drainedAt = now();
  const load = await run.done;
  apiRss.after = rssKb(web.pid);
  workerRss.after = rssKb(worker.pid);
  // Counting by dataset scans the whole collection on FerretDB/SQLite: only worth it when all is stored.
  const records = drained ? await ctx.projectDb.collection(COLLECTIONS.records).countDocuments({ feedback_dataset_id: dataset }, { maxTimeMS: 120_000 }) : Number.NaN;
  const responses = drained ? await ctx.projectDb.collection(COLLECTIONS.responses).countDocuments({ feedback_dataset_id: dataset }, { maxTimeMS: 120_000 }) : Number.NaN;
  const dl = (await deadLetters.countDocuments({})) - dl0;
  const acceptS = ((acceptedAt ?? drainedAt) - t0) / 1000;
  const result: BurstResult = {
    size,
    drained,
    workerFinished: stored,
    connections: ctx.opts.burstConnections,
    accepted: load.ok,
    serverAccepted: target,
    non2xx: load.non2xx,
    statusCodes: load.statusCodes,
    errors: load.errors,
    storedRecords: records,
    storedResponses: responses,
    deadLetters: dl,
    exactlyOnce: drained && records === target && responses === target && dl === 0 && load.ok === target,
    acceptS,
    drainS: (drainedAt - t0) / 1000,
    tailS: (drainedAt - (acceptedAt ?? drainedAt)) / 1000,
    acceptRps: load.ok / acceptS,
    p99Ms: load.latencyMs.p99,
    maxMs: load.latencyMs.max,
    peakBacklogWrites: peakWrites,
    peakBacklogJobs: peakJobs,
    apiRssKb: apiRss,
    workerRssKb: workerRss,
    redisUsedPeakBytes: redisPeak,
  };
  progress(
    `  burst ${index + 1}: accepted ${fmt(load.ok)} (server ${fmt(target)}) in ${acceptS.toFixed(1)} s (${fmt(result.acceptRps)} req/s, p99 ${load.latencyMs.p99.toFixed(0)} ms), ` +
      (drained
        ? `stored ${fmt(records)} records / ${fmt(responses)} responses, all stored after ${result.drainS.toFixed(1)} s`
        : `NOT DRAINED: the worker finished ${fmt(stored)} writes in ${result.drainS.toFixed(1)} s (${fmt(stored / result.drainS)} writes/s)`) +
      `, peak backlog ${fmt(peakWrites)} writes / ${fmt(peakJobs)} jobs, API RSS ${fmt(apiRss.before / 1024)} → ${fmt(apiRss.peak / 1024)} → ${fmt(apiRss.after / 1024)} MB` +
      (drained && !result.exactlyOnce ? '  NOT EXACTLY ONCE' : '') +
      (load.non2xx + load.errors > 0 ? `  non-2xx ${JSON.stringify(load.statusCodes)} errors ${load.errors}` : ''),
  );
  if (!drained) await resetProject(ctx);
  return result;
}

