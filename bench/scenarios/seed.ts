// Seeding: records created through the real API before the rounds (the targets of
// /feedback-response), and starting over on a fresh store when a backlog could not be stored.
import { randomBytes } from 'node:crypto';
import { COLLECTIONS } from '../../shared/mongo.js';
import type { RecordWrite } from '../../shared/writes.js';
import { recordBody } from '../lib/load.js';
import { fmt } from '../lib/report.js';
import { destroyService, startFerretDbServer, waitForPort } from '../lib/services.js';
import { backlogJobs, connectStore, progress, ROOT, SEED_RECORDS, waitProjectIdle, type Ctx } from '../lib/runner.js';

/** Records created through the real API and stored by the worker; the /feedback-response share targets them. */
export async function seed(ctx: Ctx, count: number): Promise<void> {
  const body = recordBody('bench_seed', 0);
  const ids: string[] = [];
  let next = 0;
  const one = async (): Promise<void> => {
    while (next < count) {
      next++;
      const res = await fetch(`http://127.0.0.1:${ctx.ports.web}/feedback-record`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${ctx.apiKey}` },
        body,
        signal: AbortSignal.timeout(10_000),
      });
      const json = (await res.json()) as { feedback_record_id?: string };
      if (res.status !== 200 || json.feedback_record_id === undefined) throw new Error(`seeding: /feedback-record answered ${res.status} ${JSON.stringify(json)}`);
      ids.push(json.feedback_record_id);
    }
  };
  await Promise.all(Array.from({ length: 20 }, one));
  await waitProjectIdle(ctx, 60_000);
  const stored = await ctx.projectDb.collection(COLLECTIONS.records).countDocuments({ feedback_dataset_id: 'bench_seed' });
  if (stored < count) throw new Error(`seeding: ${stored} of ${count} records stored`);
  ctx.seedIds = ids;
  // A write as the worker sees it, for the raw insertMany documents.
  const doc = await ctx.projectDb.collection<{ _id: string }>(COLLECTIONS.records).findOne({ feedback_dataset_id: 'bench_seed' });
  const parsed = JSON.parse(body) as { record: RecordWrite['record']; response: { values: Record<string, unknown>; status: 'submitted'; user_id: string } };
  ctx.sampleWrite = {
    kind: 'record',
    request_id: randomBytes(16).toString('hex'),
    accepted_at: Date.now(),
    api_key: 'bench',
    record_id: doc?._id ?? 'rec_x',
    response_id: 'rsp_x',
    record: parsed.record,
    response: parsed.response,
  };
}


/**
 * When the worker could not store a backlog within its budget, the bench throws that backlog
 * away so that the next measurement does not run beside it: the worker and its FerretDB are
 * killed (FerretDB would go on scanning for the dead worker's requests, and a FerretDB/SQLite
 * restarted on the same files panics in createIndexes), the queue is obliterated, and the worker
 * starts again on a fresh FerretDB, seeded again. Only the benchmark's own data is lost. The fresh
 * FerretDB listens on the old one's port: the API processes (web, web_b, the baselines) keep their
 * `MONGODB_URI` and their drivers reconnect to it (on another port, the admin routes of the later
 * project_webhook design answered 503).
 */
export async function resetProject(ctx: Ctx): Promise<void> {
  const left = await backlogJobs(ctx.projectQueue);
  progress(`  throwing away the ${fmt(left)} jobs the worker did not store in time (worker restarted on a fresh FerretDB, queue emptied)`);
  await ctx.procs.worker?.kill();
  await ctx.mongo.close(true).catch(() => undefined);
  const { port } = ctx.ferret;
  await destroyService(ctx.ferret);
  await ctx.projectQueue.obliterate({ force: true });
  ctx.ferret = await startFerretDbServer(ROOT, port);
  Object.assign(ctx, await connectStore(ctx));
  ctx.procs.worker = ctx.spawnWorker(ctx.ferret.url);
  await waitForPort(ctx.ports.worker, 60_000).catch((err: unknown) => {
    throw new Error(`the restarted worker did not come up: ${(err as Error).message}\n${ctx.procs.worker?.stderrTail() ?? ''}`);
  });
  await seed(ctx, SEED_RECORDS);
}

