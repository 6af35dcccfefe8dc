// What GET /datasets/{id}/progress costs on a large dataset: the reads of api/annotation-reads.ts
// on a store seeded with N records (two thirds pending, one third completed) and 2N responses of
// 20 annotators, beside a neighbour dataset of the same size that the counts must skip. The
// worker's indexes are created first on the empty collections, as the worker does at start-up
// (`--indexes-after`: built over the seeded collections instead; `record_user_unique` is created
// not unique unless `--unique`, see bench/lib/seed-indexes.ts).
//
// Then `--poll S` seconds (default 60) of a dashboard polling every 2 s, through the API's reader
// as shipped (large datasets' counts kept a while, api/progress-cache.ts) and counting on every
// call, one after the other: call latency, how old the counts were, the store's CPU per second.
//
//   node --import tsx bench/progress-cost.ts [--records N] [--calls N] [--poll S] [--indexes-after] [--unique]
import { MongoClient } from 'mongodb';
import { createAnnotationReader, type AnnotationReader } from '../api/annotation-reads.js';
import { PROGRESS_CACHE_DEFAULTS } from '../api/progress-cache.js';
import type { RecordDoc, ResponseDoc } from '../shared/documents.js';
import { COLLECTIONS } from '../shared/mongo.js';
import { fmt } from './lib/report.js';
import { progress } from './lib/runner.js';
import { startTestStore } from './lib/services.js';
import { monitoredClient } from './lib/store-monitor.js';
import { storeCpuSeconds } from './lib/proc-cpu.js';
import { createSeedIndexes } from './lib/seed-indexes.js';
import { wholeNumberArg } from './lib/args.js';

const argv = process.argv.slice(2);
const num = (name: string, def: number): number => wholeNumberArg(argv, name, def, 0);
const RECORDS = num('--records', 100_000);
const CALLS = num('--calls', 5);
const POLL_S = num('--poll', 60);
const POLL_EVERY_MS = 2_000;
const BATCH = 1000;
/** Seed batches sent at once. */
const SEED_IN_FLIGHT = 4;
const INDEXES_AFTER = argv.includes('--indexes-after');
const UNIQUE = argv.includes('--unique');

async function main(): Promise<void> {
  const store = await startTestStore();
  const mon = await monitoredClient(store.url);
  try {
    const db = mon.client.db('progress_cost');
    const records = db.collection<RecordDoc>(COLLECTIONS.records);
    const responses = db.collection<ResponseDoc>(COLLECTIONS.responses);
    // Building an index over millions of documents outlasts the monitored client's socket timeout.
    const builder = new MongoClient(store.url, { socketTimeoutMS: 0 });
    const buildIndexes = async () => {
      const t = Date.now();
      try {
        await createSeedIndexes(builder.db('progress_cost'), { unique: UNIQUE });
      } finally {
        await builder.close();
      }
      progress(`indexes built in ${fmt((Date.now() - t) / 1000, 1)} s${UNIQUE ? '' : ' (record_user_unique not unique)'}`);
    };
    if (!INDEXES_AFTER) await buildIndexes();
    const started = Date.now();
    const seedCpu0 = storeCpuSeconds(store.postgresPort);
    // Several batches at a time.
    const inFlight: Promise<unknown>[] = [];
    let seeded = 0;
    for (const dataset of ['ds_big', 'ds_neighbour']) {
      for (let from = 0; from < RECORDS; from += BATCH) {
        const recs: RecordDoc[] = [];
        const resps: ResponseDoc[] = [];
        for (let i = from; i < Math.min(RECORDS, from + BATCH); i++) {
          const at = new Date(1_700_000_000_000 + i);
          const id = `${dataset}_${i}`;
          recs.push({ _id: id, feedback_dataset_id: dataset, field_to_value: { q: i }, status: i % 3 === 0 ? 'completed' : 'pending', api_key: 'b', request_id: 'r', created_at: at, updated_at: at });
          for (const u of [i % 20, (i + 7) % 20]) {
            resps.push({ _id: `${id}_${u}`, feedback_record_id: id, feedback_dataset_id: dataset, user_id: `ann-${u}`, status: ['submitted', 'draft', 'discarded'][(i + u) % 3]!, values: { x: 1 }, seq: i, api_key: 'b', request_id: 'r', created_at: at, updated_at: at });
          }
        }
        inFlight.push(Promise.all([records.insertMany(recs, { ordered: false }), responses.insertMany(resps, { ordered: false })]));
        if (inFlight.length >= SEED_IN_FLIGHT) await inFlight.shift();
        seeded += recs.length;
        if (seeded % 100_000 === 0) progress(`seeded ${seeded} records and ${2 * seeded} responses, ${fmt((Date.now() - started) / 1000, 0)} s`);
      }
    }
    await Promise.all(inFlight);
    progress(`seeded 2 × ${RECORDS} records and 2 × ${2 * RECORDS} responses in ${fmt((Date.now() - started) / 1000, 1)} s (store CPU ${fmt(storeCpuSeconds(store.postgresPort) - seedCpu0, 0)} s, indexes ${INDEXES_AFTER ? 'not yet built' : 'in place'})`);
    if (INDEXES_AFTER) await buildIndexes();
    // Counting on every call: what one count costs.
    const reader = createAnnotationReader({ db, progressCache: { ...PROGRESS_CACHE_DEFAULTS, cacheFromMs: Number.POSITIVE_INFINITY } });
    const times: number[] = [];
    const cpu0 = { store: storeCpuSeconds(store.postgresPort), self: process.cpuUsage() };
    for (let k = 0; k < CALLS; k++) {
      const t = process.hrtime.bigint();
      const body = await reader.progress('ds_big', { min_submitted: 2 });
      times.push(Number(process.hrtime.bigint() - t) / 1e6);
      if (k === 0) progress(JSON.stringify({ ...body, annotators: body.annotators.length }));
    }
    const self = process.cpuUsage(cpu0.self);
    // storeCpuSeconds counts this process's children too (none but the store here); this process itself is the reader.
    progress(`CPU per call: store ${fmt(((storeCpuSeconds(store.postgresPort) - cpu0.store) * 1000) / CALLS, 0)} ms, reader ${fmt((self.user + self.system) / 1000 / CALLS, 1)} ms`);
    // The parts alone: which one costs.
    const part = async (what: string, call: () => Promise<unknown>) => {
      const t = process.hrtime.bigint();
      await call();
      progress(`${what}: ${fmt(Number(process.hrtime.bigint() - t) / 1e6, 1)} ms`);
    };
    await part('records countDocuments (dataset)', () => records.countDocuments({ feedback_dataset_id: 'ds_big' }));
    await part('records countDocuments (dataset, status pending)', () => records.countDocuments({ feedback_dataset_id: 'ds_big', status: 'pending' }));
    await part('responses aggregate by (annotator, status)', () => responses.aggregate([{ $match: { feedback_dataset_id: 'ds_big' } }, { $group: { _id: { u: '$user_id', s: '$status' }, n: { $sum: 1 } } }]).toArray());
    // What the store does for each: the plan's node types and index names (raw with --raw-plans).
    const explain = async (what: string, command: Record<string, unknown>) => {
      const plan = JSON.stringify(await db.command({ explain: command, verbosity: 'queryPlanner' }));
      const nodes = [...new Set(plan.match(/\b(Seq Scan|Index Scan|Index Only Scan|Bitmap Index Scan|Bitmap Heap Scan|Aggregate|HashAggregate|GroupAggregate|Sort|Custom Scan)\b/g) ?? [])];
      const indexes = [...new Set(plan.match(/\b(dataset_[a-z_]+|record_user_unique|_id_)\b/g) ?? [])];
      progress(`plan of ${what}: ${indexes.join(', ') || 'no index'} (${nodes.join(', ')})${argv.includes('--raw-plans') ? `\n${plan}` : ''}`);
    };
    await explain('records count (dataset, status)', { count: COLLECTIONS.records, query: { feedback_dataset_id: 'ds_big', status: 'pending' } });
    await explain('responses aggregate', { aggregate: COLLECTIONS.responses, pipeline: [{ $match: { feedback_dataset_id: 'ds_big' } }, { $group: { _id: { u: '$user_id', s: '$status' }, n: { $sum: 1 } } }], cursor: {} });
    // A dashboard polling every 2 s: as shipped, and counting on every call.
    const poll = async (what: string, polled: AnnotationReader) => {
      const lat: number[] = [];
      const ages: number[] = [];
      const cpu0 = storeCpuSeconds(store.postgresPort);
      const t0 = Date.now();
      while (Date.now() - t0 < POLL_S * 1000) {
        const t = Date.now();
        const body = await polled.progress('ds_big', { min_submitted: 2 });
        lat.push(Date.now() - t);
        ages.push(Date.now() - Date.parse(body.as_of));
        await new Promise((r) => setTimeout(r, Math.max(0, POLL_EVERY_MS - (Date.now() - t))));
      }
      const seconds = (Date.now() - t0) / 1000;
      const l = [...lat].sort((a, b) => a - b);
      const line = `polling every 2 s for ${fmt(seconds, 0)} s, ${what}: ${lat.length} calls, latency median ${fmt(l[Math.floor(l.length / 2)]!, 0)} ms, max ${fmt(l.at(-1)!, 0)} ms; counts at most ${fmt(Math.max(...ages) / 1000, 1)} s old; store CPU ${fmt((storeCpuSeconds(store.postgresPort) - cpu0) / seconds, 2)} s per second`;
      progress(line);
      return line;
    };
    const polled = POLL_S > 0 ? [await poll('as shipped (counts kept)', createAnnotationReader({ db })), await poll('counting on every call', reader)] : [];
    const sorted = [...times].sort((a, b) => a - b);
    const p95 = sorted[Math.min(sorted.length - 1, Math.ceil(0.95 * sorted.length) - 1)]!;
    process.stdout.write(`progress of ${RECORDS} records / ${2 * RECORDS} responses (and a neighbour as large): median ${fmt(sorted[Math.floor(sorted.length / 2)]!, 0)} ms, p95 ${fmt(p95, 0)} ms, min ${fmt(sorted[0]!, 0)} ms, max ${fmt(sorted.at(-1)!, 0)} ms over ${CALLS} calls\n${polled.map((l) => `${l}\n`).join('')}`);
  } finally {
    await mon.client.close().catch(() => undefined);
    await store.stop();
  }
}

await main();
