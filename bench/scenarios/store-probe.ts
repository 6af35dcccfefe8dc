// How fast the project's store answers the worker's upsert filter, next to an `_id` lookup.
import { COLLECTIONS } from '../../shared/mongo.js';
import { fmt } from '../lib/report.js';
import type { StoreProbe } from '../lib/types.js';
import { now, progress, type Ctx } from '../lib/runner.js';

/** Times one read with `_id` alone (FerretDB/SQLite pushes it down) and one with the worker's upsert filter. */
export async function storeProbe(ctx: Ctx): Promise<StoreProbe> {
  const responses = ctx.projectDb.collection<{ _id: string; seq?: number }>(COLLECTIONS.responses);
  const stats = (await ctx.projectDb.command({ collStats: COLLECTIONS.responses })) as { count?: number };
  let t = now();
  await responses.findOne({ _id: 'rsp_probe_absent' }, { maxTimeMS: 60_000 });
  const idOnlyMs = now() - t;
  t = now();
  await responses.findOne({ _id: 'rsp_probe_absent', seq: { $lt: 1 } }, { maxTimeMS: 60_000 });
  const workerFilterMs = now() - t;
  const probe = { responses: stats.count ?? Number.NaN, idOnlyMs, workerFilterMs };
  progress(`  store probe: feedback_responses holds ${fmt(probe.responses)} documents; findOne({_id}) ${idOnlyMs.toFixed(1)} ms, findOne({_id, seq: {$lt}}) (the worker's upsert filter) ${workerFilterMs.toFixed(1)} ms`);
  return probe;
}

