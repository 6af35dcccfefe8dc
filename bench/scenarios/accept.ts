// The accept rounds: one timed load run per design, with what each design needs around it
// (Redis memory of the queued writes, the worker's drain after the paused project run, the
// end-to-end lag of the live run).
import { bucketQuantile, bucketsDiff, type Scrape } from '../lib/prom.js';
import { fmt } from '../lib/report.js';
import type { Mix } from '../lib/load.js';
import type { Design, LiveSummary, Round } from '../lib/types.js';
import { WEBHOOK_EVENT_TYPES } from '../../shared/webhook-events.js';
import {
  backlogJobs, drainWithin, jobJsonBytesPerWrite, measure, now, processed, progress, redisMemory, sleep, usedMemory, waitProjectIdle, workerScrape, type Ctx,
} from '../lib/runner.js';
import { drainPaused, rawInsertMany } from './drain.js';
import { storeProbe } from './store-probe.js';
import { resetProject } from './seed.js';

async function runCeilingOrDirect(ctx: Ctx, design: 'raw_http' | 'ceiling' | 'direct', round: number, r: Round): Promise<void> {
  r.runs[design] = (await measure(ctx, design, round, ctx.opts.durationS)).summary;
}

async function runTextbook(ctx: Ctx, round: number, r: Round): Promise<void> {
  await ctx.textbookQueue.obliterate({ force: true });
  await sleep(300);
  const mem0 = await usedMemory(ctx.redisClient);
  const { summary, mix } = await measure(ctx, 'textbook', round, ctx.opts.durationS);
  r.runs.textbook = summary;
  await sleep(500);
  const mem1 = await usedMemory(ctx.redisClient);
  const jobs = await backlogJobs(ctx.textbookQueue);
  r.textbookRedis = redisMemory(mem1 - mem0, summary.serverOk, jobs, mix.meanBodyBytes, await jobJsonBytesPerWrite(ctx.textbookQueue));
  const t = now();
  await ctx.textbookQueue.obliterate({ force: true });
  progress(`  textbook: Redis ${fmt(r.textbookRedis.bytesPerWrite)} B per queued write (${fmt(jobs)} jobs); queue emptied in ${fmt((now() - t) / 1000, 1)} s`);
}

/** (d) with the worker paused: the API alone; then Redis bytes per queued write; then the worker alone drains it; then raw insertMany. */
async function runProject(ctx: Ctx, round: number, r: Round): Promise<void> {
  await waitProjectIdle(ctx);
  await ctx.projectQueue.pause();
  let mix: Mix | undefined;
  let meanJobSize: number | undefined;
  try {
    await sleep(300);
    const mem0 = await usedMemory(ctx.redisClient);
    const m = await measure(ctx, 'project', round, ctx.opts.durationS);
    mix = m.mix;
    const summary = m.summary;
    r.runs.project = summary;
    await sleep(500);
    const mem1 = await usedMemory(ctx.redisClient);
    const jobs = await backlogJobs(ctx.projectQueue);
    r.projectRedis = redisMemory(mem1 - mem0, summary.serverOk, jobs, mix.meanBodyBytes, await jobJsonBytesPerWrite(ctx.projectQueue));
    progress(`  project: ${fmt(summary.serverOk)} writes in ${fmt(jobs)} jobs wait in Redis: ${fmt(r.projectRedis.bytesPerWrite)} B per write (JSON body ${fmt(mix.meanBodyBytes)} B, job JSON ${fmt(r.projectRedis.jobJsonBytesPerWrite)} B per write)`);

    meanJobSize = await drainPaused(ctx, r, summary.serverOk, jobs);
    if (r.drain?.drained !== true) await resetProject(ctx);
    r.projectRedis = { ...r.projectRedis, usedAfterDrainBytes: await usedMemory(ctx.redisClient) };
  } finally {
    await ctx.projectQueue.resume();
  }
  r.storeProbe = await storeProbe(ctx);
  const raw = mix === undefined ? undefined : await rawInsertMany(ctx, meanJobSize, mix);
  if (raw !== undefined) r.raw = raw;
}

/** (d') a second API process of the project with the --ab settings; its queue has no worker and is emptied after the run. */
async function runProjectB(ctx: Ctx, round: number, r: Round): Promise<void> {
  r.runs.project_b = (await measure(ctx, 'project_b', round, ctx.opts.durationS)).summary;
  await ctx.projectQueueB.obliterate({ force: true });
}

/** (d) with the worker draining during the load: accept rate on shared cores, end-to-end lag, whether the worker keeps up. */
async function runProjectLive(ctx: Ctx, round: number, r: Round): Promise<void> {
  const live = await liveRun(ctx, 'project_live', round, r);
  r.live = live;
}

/**
 * The same with one webhook endpoint subscribed to every event (issue 24), registered through the
 * admin API just before the run and deleted after it (with its undelivered events), so that its
 * deliveries never run into another design's run. The receiver is this process (its CPU counts
 * as the load generator's).
 */
async function runProjectWebhook(ctx: Ctx, round: number, r: Round): Promise<void> {
  const receiver = await ctx.webhookReceiver();
  const base = `http://127.0.0.1:${ctx.ports.web}/admin/webhooks`;
  const headers = { authorization: `Bearer ${ctx.adminKey}`, 'content-type': 'application/json' };
  const created = await fetch(base, { method: 'POST', headers, body: JSON.stringify({ url: receiver.url, events: [...WEBHOOK_EVENT_TYPES] }) });
  if (created.status !== 201) throw new Error(`POST /admin/webhooks answered ${created.status}: ${await created.text()}`);
  const { id } = (await created.json()) as { id: string };
  const received0 = receiver.received();
  try {
    // Every worker process reloads its endpoints within WEBHOOK_REFRESH_MS (the bench sets 500 ms when this design runs).
    await sleep(1_500);
    const live = await liveRun(ctx, 'project_webhook', round, r);
    r.liveWebhook = { ...live, eventsReceived: receiver.received() - received0 };
    progress(`  project+worker+webhook: ${fmt(r.liveWebhook.eventsReceived)} events received by the end of the drain`);
  } finally {
    const deleted = await fetch(`${base}/${id}`, { method: 'DELETE', headers });
    if (deleted.status !== 204 && deleted.status !== 200) progress(`  DELETE /admin/webhooks/${id} answered ${deleted.status}: later designs may see its deliveries`);
    await sleep(1_500);
  }
}

async function liveRun(ctx: Ctx, design: 'project_live' | 'project_webhook', round: number, r: Round): Promise<LiveSummary> {
  await waitProjectIdle(ctx);
  const w0 = await workerScrape(ctx);
  let peakJobs = 0;
  let wEnd: Scrape | undefined;
  const { summary } = await measure(ctx, design, round, ctx.opts.durationS, async (run) => {
    let finished = false;
    void run.done.then(
      () => (finished = true),
      () => (finished = true),
    );
    while (!finished) {
      peakJobs = Math.max(peakJobs, await backlogJobs(ctx.projectQueue));
      await sleep(250);
    }
    wEnd = await workerScrape(ctx);
  });
  r.runs[design] = summary;
  const t0 = now();
  const drained = await drainWithin(ctx, ctx.opts.drainS);
  const tail = (now() - t0) / 1000;
  const w1 = await workerScrape(ctx);
  const duringLoad = processed(wEnd ?? w1) - processed(w0);
  const lag = bucketsDiff(w0, w1, 'feedback_worker_lag_seconds');
  const p50 = bucketQuantile(lag, 0.5);
  const p99 = bucketQuantile(lag, 0.99);
  const live: LiveSummary = {
    drained,
    storeRateDuringLoad: duringLoad / summary.durationS,
    backlogAtEndWrites: summary.serverOk - duringLoad,
    peakBacklogWrites: Number.NaN,
    drainTailS: tail,
    lagP50Ms: p50 === undefined ? undefined : p50 * 1000,
    lagP99Ms: p99 === undefined ? undefined : p99 * 1000,
    lagCount: lag.at(-1)?.count ?? 0,
  };
  progress(
    `  ${design}: stored ${fmt(live.storeRateDuringLoad)} writes/s during the load, ${fmt(live.backlogAtEndWrites)} left at its end (peak ${fmt(peakJobs)} jobs), ` +
      `${drained ? `drained ${tail.toFixed(2)} s later` : `NOT DRAINED ${tail.toFixed(0)} s later (${fmt(summary.serverOk - (processed(w1) - processed(w0)))} writes left)`}; lag of stored writes p50 ${fmt(live.lagP50Ms)} ms p99 ${fmt(live.lagP99Ms)} ms`,
  );
  if (!drained) await resetProject(ctx);
  return live;
}

/** The accept round of each design. */
export const ACCEPT_SCENARIOS: Readonly<Record<Design, (ctx: Ctx, round: number, r: Round) => Promise<void>>> = {
  raw_http: (ctx, round, r) => runCeilingOrDirect(ctx, 'raw_http', round, r),
  ceiling: (ctx, round, r) => runCeilingOrDirect(ctx, 'ceiling', round, r),
  direct: (ctx, round, r) => runCeilingOrDirect(ctx, 'direct', round, r),
  textbook: runTextbook,
  project: runProject,
  project_b: runProjectB,
  project_live: runProjectLive,
  project_webhook: runProjectWebhook,
};
