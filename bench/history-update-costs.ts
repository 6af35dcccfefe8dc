// What keeping a response's history costs the store, by the form of the update: the worker's
// versions of the same responses stored with a plain `$set` (no history), with the aggregation
// pipeline that rebuilds `history` (worker/response-history.ts, its general form; the only one
// before 2026-11-26), and with `$set` + `$push` of the new version (`$each`, `$slice`; its quick
// form). Same documents, same order, one fresh database per form, store otherwise idle.
//
//   node --import tsx bench/history-update-costs.ts [--docs N] [--passes N] [--rounds N]
import { MongoClient, type AnyBulkWriteOperation, type Db, type Document } from 'mongodb';
import { COLLECTIONS } from '../shared/mongo.js';
import type { ResponseDoc } from '../shared/documents.js';
import { responseUpdate, type ResponseCarrying } from '../worker/documents.js';
import { ensureIndexes } from '../worker/indexes.js';
import { responseUpdateWithHistory } from '../worker/response-history.js';
import { storeCpuSeconds } from './lib/proc-cpu.js';
import { startTestStore } from './lib/services.js';
import { wholeNumberArg } from './lib/args.js';

const argv = process.argv.slice(2);
const num = (name: string, def: number): number => wholeNumberArg(argv, name, def);
const DOCS = num('--docs', 10_000);
const PASSES = num('--passes', 3);
const ROUNDS = num('--rounds', 2);
const CHUNK = 250;
const IN_FLIGHT = 4;
const CAP = 20;

type Form = 'plain' | 'pipeline' | 'quick';
const FORMS = (argv.includes('--forms') ? argv[argv.indexOf('--forms') + 1]!.split(',') : ['plain', 'pipeline', 'quick']) as Form[];

function version(i: number, pass: number, seq: number): ResponseCarrying {
  const recordId = `rec_${i.toString().padStart(6, '0')}`;
  return {
    seq,
    index: 0,
    write: {
      kind: 'response',
      request_id: `req-${pass}-${i}`,
      accepted_at: Date.now(),
      api_key: 'bench',
      record_id: recordId,
      response_id: `rsp_${i.toString().padStart(6, '0')}`,
      response: { status: pass % 2 === 0 ? 'draft' : 'submitted', values: { helpful: pass % 5, ranking: ['answer', 'prompt'], comment: `pass ${pass}` }, user_id: `annotator-${i % 20}` },
    },
  } as ResponseCarrying;
}

function update(form: Form, item: ResponseCarrying): { filter: Document; update: Document | Document[] } {
  if (form === 'plain') return responseUpdate(item, 'ds', item.write.accepted_at);
  const both = responseUpdateWithHistory(item, [], 'ds', item.write.accepted_at, CAP);
  return form === 'pipeline' ? both.recheck!() : both;
}

async function runForm(db: Db, form: Form, postgresPort: number): Promise<{ seconds: number; cpu: number }> {
  const col = db.collection<ResponseDoc>(COLLECTIONS.responses);
  await ensureIndexes(db);
  let seq = 1;
  // The first versions, inserted alike for every form.
  const firsts = Array.from({ length: DOCS }, (_, i) => version(i, 0, seq++));
  for (let k = 0; k < firsts.length; k += 1000) {
    await col.bulkWrite(firsts.slice(k, k + 1000).map((it) => ({ updateOne: { ...update(form, it), upsert: true } })) as AnyBulkWriteOperation<ResponseDoc>[], { ordered: false });
  }
  const cpu0 = storeCpuSeconds(postgresPort);
  const t0 = process.hrtime.bigint();
  for (let pass = 1; pass <= PASSES; pass++) {
    const items = Array.from({ length: DOCS }, (_, i) => version(i, pass, seq++));
    const chunks: ResponseCarrying[][] = [];
    for (let k = 0; k < items.length; k += CHUNK) chunks.push(items.slice(k, k + CHUNK));
    let next = 0;
    await Promise.all(Array.from({ length: IN_FLIGHT }, async () => {
      while (next < chunks.length) {
        const chunk = chunks[next++]!;
        await col.bulkWrite(chunk.map((it) => ({ updateOne: { ...update(form, it), upsert: true } })) as AnyBulkWriteOperation<ResponseDoc>[], { ordered: false });
      }
    }));
  }
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  const cpu = storeCpuSeconds(postgresPort) - cpu0;
  const one = await col.findOne({ _id: 'rsp_000001' } as never);
  const historyLength = (one as { history?: unknown[] } | null)?.history?.length ?? 0;
  if (form !== 'plain' && historyLength !== PASSES + 1) throw new Error(`${form}: history of ${historyLength}`);
  return { seconds, cpu };
}

async function main(): Promise<void> {
  const store = await startTestStore();
  const client = await MongoClient.connect(store.url);
  let n = 0;
  try {
    console.log(`${DOCS} responses, ${PASSES} later versions each, commands of ${CHUNK}, ${IN_FLIGHT} in flight; store CPU from /proc`);
    console.log('| round | form | updates/s | store CPU µs/update |');
    console.log('|---|---|---|---|');
    for (let round = 1; round <= ROUNDS; round++) {
      const order = round % 2 === 1 ? FORMS : [...FORMS].reverse();
      for (const form of order) {
        const { seconds, cpu } = await runForm(client.db(`hist_${n++}`), form, store.postgresPort);
        const updates = DOCS * PASSES;
        console.log(`| ${round} | ${form} | ${Math.round(updates / seconds).toLocaleString('en-US')} | ${Math.round((cpu * 1e6) / updates)} |`);
      }
    }
  } finally {
    await client.close();
    await store.stop();
  }
}

await main();
