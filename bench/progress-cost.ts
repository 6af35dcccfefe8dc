// What GET /datasets/{id}/progress costs on a large dataset: the reads of api/annotation-reads.ts
// on a store seeded with N records (two thirds pending, one third completed) and 2N responses of
// 20 annotators, beside a neighbour dataset of the same size that the counts must skip.
//
//   node --import tsx bench/progress-cost.ts [--records N] [--calls N]
import { MongoClient } from 'mongodb';
import { createAnnotationReader } from '../api/annotation-reads.js';
import type { RecordDoc, ResponseDoc } from '../shared/documents.js';
import { COLLECTIONS } from '../shared/mongo.js';
import { ensureIndexes } from '../worker/indexes.js';
import { fmt } from './lib/report.js';
import { progress } from './lib/runner.js';
import { startTestStore } from './lib/services.js';
import { monitoredClient } from './lib/store-monitor.js';

const argv = process.argv.slice(2);
const num = (name: string, def: number) => {
  const i = argv.indexOf(name);
  return i < 0 ? def : Number(argv[i + 1]);
};
const RECORDS = num('--records', 100_000);
const CALLS = num('--calls', 5);
const BATCH = 1000;
/** Seed batches sent at once. */
const SEED_IN_FLIGHT = 4;

async function main(): Promise<void> {
  const store = await startTestStore();
  const mon = await monitoredClient(store.url);
  try {
    const db = mon.client.db('progress_cost');
    const records = db.collection<RecordDoc>(COLLECTIONS.records);
    const responses = db.collection<ResponseDoc>(COLLECTIONS.responses);
    const started = Date.now();
    // Seeded before the indexes exist, several batches at a time: on this store each insert
    // updates every index of the whole document, which made a seed of 1M records take hours.
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
    const indexed = Date.now();
    // Building an index over millions of documents outlasts the monitored client's socket timeout.
    const builder = new MongoClient(store.url, { socketTimeoutMS: 0 });
    try {
      await ensureIndexes(builder.db('progress_cost'));
    } finally {
      await builder.close();
    }
    progress(`indexes built in ${fmt((Date.now() - indexed) / 1000, 1)} s`);
    progress(`seeded 2 × ${RECORDS} records and 2 × ${2 * RECORDS} responses in ${fmt((Date.now() - started) / 1000, 1)} s`);
    const reader = createAnnotationReader({ db });
    const times: number[] = [];
    for (let k = 0; k < CALLS; k++) {
      const t = process.hrtime.bigint();
      const body = await reader.progress('ds_big', { min_submitted: 2 });
      times.push(Number(process.hrtime.bigint() - t) / 1e6);
      if (k === 0) progress(JSON.stringify({ ...body, annotators: body.annotators.length }));
    }
    // The parts alone: which one costs.
    const part = async (what: string, call: () => Promise<unknown>) => {
      const t = process.hrtime.bigint();
      await call();
      progress(`${what}: ${fmt(Number(process.hrtime.bigint() - t) / 1e6, 1)} ms`);
    };
    await part('records countDocuments (dataset)', () => records.countDocuments({ feedback_dataset_id: 'ds_big' }));
    await part('records countDocuments (dataset, status pending)', () => records.countDocuments({ feedback_dataset_id: 'ds_big', status: 'pending' }));
    await part('responses aggregate by (annotator, status)', () => responses.aggregate([{ $match: { feedback_dataset_id: 'ds_big' } }, { $group: { _id: { u: '$user_id', s: '$status' }, n: { $sum: 1 } } }]).toArray());
    const sorted = [...times].sort((a, b) => a - b);
    process.stdout.write(`progress of ${RECORDS} records / ${2 * RECORDS} responses (and a neighbour as large): median ${fmt(sorted[Math.floor(sorted.length / 2)]!, 0)} ms, min ${fmt(sorted[0]!, 0)} ms, max ${fmt(sorted.at(-1)!, 0)} ms over ${CALLS} calls\n`);
  } finally {
    await mon.client.close().catch(() => undefined);
    await store.stop();
  }
}

await main();
