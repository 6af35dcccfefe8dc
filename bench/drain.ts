// `npm run bench:drain`: how fast the worker drains a burst of queued writes, against the store's
// own rate for the same final documents, in the same run; and whether the worker's cost per write
// stays flat as the store grows.
//
//   node --import tsx bench/drain.ts [--writes N] [--seed-docs N] [--rounds N] [--job-writes N] [--quick] [--no-big]
//
// Per round (alternating): usual mix drain, its raw twin, the textbook worker's drain of it
// (bench/peers/textbook-worker.ts), the same for the annotation-heavy mix,
// plain insertMany of as many documents, and the usual mix drained into the large seeded store.
// Each drain and raw pass gets a fresh database seeded with the same 10,000 documents. The passes
// are in bench/scenarios/worker-drain.ts and store-raw.ts, the writes in bench/lib/drain-writes.ts.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RecordDoc, ResponseDoc } from '../shared/documents.js';
import { startRedis } from '../devkit/servers.js';
import { renderDrainReport, type DrainRun, type RoundRow } from './lib/drain-report.js';
import { buildBurst, buildSeed, seedDb, type Seed } from './lib/drain-writes.js';
import { fmt } from './lib/report.js';
import { progress, ROOT, STARTED } from './lib/runner.js';
import { startTestStore } from './lib/services.js';
import { monitoredClient } from './lib/store-monitor.js';
import { plainInserts, rawBurst } from './scenarios/store-raw.js';
import { drainBurst } from './scenarios/worker-drain.js';
import { textbookDrain } from './scenarios/textbook-drain.js';
import { wholeNumberArg } from './lib/args.js';

const argv = process.argv.slice(2);
const flag = (name: string) => argv.includes(name);
const num = (name: string, def: number): number => wholeNumberArg(argv, name, def, 0);
if (flag('--help')) {
  process.stdout.write('usage: node --import tsx bench/drain.ts [--writes N] [--seed-docs N] [--rounds N] [--job-writes N] [--quick] [--no-big]\n');
  process.exit(0);
}
const QUICK = flag('--quick');
const WRITES = num('--writes', QUICK ? 3_000 : 20_000);
/** The large store of part 3; --quick defaults lower so that a smoke run stays short. */
const SEED_DOCS = num('--seed-docs', QUICK ? 50_000 : 200_000);
const ROUNDS = Math.max(2, num('--rounds', 2));
const BIG = !flag('--no-big');
/** Writes per queued job: the API's jobs hold a few writes under moderate load (issue 21 saw 2.6 on average), up to BATCH_MAX_ITEMS in a burst. */
const JOB_WRITES_ARG = num('--job-writes', 200);
/** Documents every drain/raw database starts with: half records, half their first responses. */
const BASE_DOCS = 10_000;

const stamp = STARTED.toISOString().replace(/[:.]/g, '-').replace(/-\d{3}Z$/, 'Z');
const outDir = join(ROOT, 'bench', 'results');
const outFile = join(outDir, `drain-${stamp}.md`);
const run: DrainRun = {
  command: `node --import tsx bench/drain.ts ${argv.join(' ')}`.trim(),
  writes: WRITES,
  jobWrites: JOB_WRITES_ARG,
  seedDocs: SEED_DOCS,
  baseDocs: BASE_DOCS,
  roundsRequested: ROUNDS,
  backend: '',
  bigSeedText: 'not run',
  rounds: [],
};

function save(final: boolean): void {
  mkdirSync(outDir, { recursive: true });
  writeFileSync(outFile, renderDrainReport(run, final));
}

async function main(): Promise<void> {
  progress(`writes ${WRITES}, seed-docs ${SEED_DOCS}, rounds ${ROUNDS}; results in ${outFile}`);
  const store = await startTestStore();
  run.backend = store.backend;
  const redis = await startRedis();
  const mon = await monitoredClient(store.url, store.postgresPort);
  const stop = async () => {
    await mon.client.close().catch(() => undefined);
    await redis.destroy();
    await store.stop();
  };
  process.once('SIGINT', () => void stop().finally(() => process.exit(130)));
  try {
    const base = buildSeed(BASE_DOCS);
    let big: Seed | undefined;
    if (BIG) {
      big = buildSeed(SEED_DOCS);
      const seconds = await seedDb(mon.client.db('drain_big'), big);
      run.bigSeedText = `seeding took ${fmt(seconds, 1)} s, ${fmt(SEED_DOCS / seconds)} docs/s`;
      progress(`large store: ${run.bigSeedText}`);
    }
    let n = 0;
    const fresh = async () => {
      const name = `drain_${n++}`;
      await seedDb(mon.client.db(name), base);
      return name;
    };
    const drop = (name: string) => mon.client.db(name).dropDatabase();
    const target = { redisUrl: redis.url, storeUrl: store.url, mon };
    for (let round = 1; round <= ROUNDS; round++) {
      const row: RoundRow = { round };
      run.rounds.push(row);
      for (const mix of ['usual', 'annotation-heavy'] as const) {
        const burst = buildBurst(WRITES, mix, base.targets);
        let db = await fresh();
        const d = await drainBurst({ ...target, dbName: db, burst, seed: base, jobWrites: JOB_WRITES_ARG });
        progress(`round ${round} ${mix} drain: ${fmt(d.rate)} writes/s in ${fmt(d.seconds, 1)} s, ${d.verified}`);
        await drop(db);
        db = await fresh();
        const rw = await rawBurst(mon, db, burst, base);
        progress(`round ${round} ${mix} raw: ${fmt(rw.rate)} writes/s in ${fmt(rw.seconds, 1)} s`);
        await drop(db);
        db = await fresh();
        const tb = await textbookDrain({ redisUrl: redis.url, mon, dbName: db, burst });
        progress(`round ${round} ${mix} textbook worker: ${fmt(tb.rate)} writes/s in ${fmt(tb.seconds, 1)} s, ${tb.verified}`);
        await drop(db);
        if (mix === 'usual') {
          row.usual = d;
          row.usualRaw = rw;
          row.usualTextbook = tb;
          db = await fresh();
          row.plain = await plainInserts(mon, db, burst);
          progress(`round ${round} plain insertMany: ${fmt(row.plain.rate)} writes/s`);
          await drop(db);
        } else {
          row.heavy = d;
          row.heavyRaw = rw;
          row.heavyTextbook = tb;
        }
        save(false);
      }
      if (big !== undefined) {
        const burst = buildBurst(WRITES, 'usual', big.targets);
        // The large store keeps the earlier rounds' writes: check against what it holds now.
        const before: Seed = { ...big, records: [...big.records, ...new Array<RecordDoc>((round - 1) * burst.newRecords)], responses: [...big.responses, ...new Array<ResponseDoc>((round - 1) * burst.newRecords)] };
        row.big = await drainBurst({ ...target, dbName: 'drain_big', burst, seed: before, jobWrites: JOB_WRITES_ARG });
        progress(`round ${round} usual drain on ${SEED_DOCS} docs: ${fmt(row.big.rate)} writes/s in ${fmt(row.big.seconds, 1)} s, ${row.big.verified}`);
        save(false);
      }
    }
    save(true);
    process.stdout.write(`${renderDrainReport(run, true)}\n`);
    process.stdout.write(`(written to ${outFile}; took ${fmt((Date.now() - STARTED.getTime()) / 1000)} s)\n`);
  } finally {
    await stop();
  }
}

await main();
