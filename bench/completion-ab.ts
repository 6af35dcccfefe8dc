// Issue 25's write-path target: the worker's drain with a completion rule and response history
// on, against the same drain with both off, in the same run (alternating, fresh databases seeded
// alike, the same bursts).
//
//   node --import tsx bench/completion-ab.ts [--writes N] [--rounds N] [--job-writes N] [--modes off,on,history,rule]
//
// "off": RESPONSE_HISTORY_MAX=0 and no definition for the dataset (records stay `submitted`).
// "on": RESPONSE_HISTORY_MAX=20 (the default) and the definition with `completion: {min_submitted: 2}`.
// `--modes off,history,rule,on` adds each part alone.
// The seeded documents are those the worker stores in each mode, as in a dataset that had its rule
// and history from the start: with the rule, records `pending` (one submitted response of two);
// with history, each response's `history` holding its version (worker/response-history.ts).
// `--seed-as-before`: seeded alike in every mode, as stored without rule and history (records
// `submitted`, no `history`), as in a dataset given its rule, or a deployment given history, after
// they were stored: then the first update of each record also writes its status, and of each
// response rebuilds its history (the general form of the update).
import { mkdirSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { createDatasetAdmin } from '../shared/dataset-admin.js';
import type { RecordDoc } from '../shared/documents.js';
import { COLLECTIONS } from '../shared/mongo.js';
import { startRedis } from '../devkit/servers.js';
import { buildBurst, buildSeed, DRAIN_DATASET, seedDb } from './lib/drain-writes.js';
import { storeCpuSeconds } from './lib/proc-cpu.js';
import { fmt } from './lib/report.js';
import { progress, ROOT, STARTED } from './lib/runner.js';
import { startTestStore } from './lib/services.js';
import { monitoredClient } from './lib/store-monitor.js';
import { drainBurst } from './scenarios/worker-drain.js';
import { wholeNumberArg } from './lib/args.js';

const argv = process.argv.slice(2);
const num = (name: string, def: number): number => wholeNumberArg(argv, name, def);
const WRITES = num('--writes', 10_000);
const ROUNDS = num('--rounds', 3);
const JOB_WRITES = num('--job-writes', 200);
const BASE_DOCS = 10_000;
const MODES = {
  off: { env: { RESPONSE_HISTORY_MAX: '0' }, rule: false },
  on: { env: { RESPONSE_HISTORY_MAX: '20' }, rule: true },
  /** The two parts alone, to tell which one costs. */
  history: { env: { RESPONSE_HISTORY_MAX: '20' }, rule: false },
  rule: { env: { RESPONSE_HISTORY_MAX: '0' }, rule: true },
} as const;
type Mode = keyof typeof MODES;
const SEED_AS_BEFORE = argv.includes('--seed-as-before');
const modesArg = argv.indexOf('--modes');
/** `--modes off,on,history,rule`; default off,on. The order alternates by round. */
const MODE_LIST: Mode[] = modesArg < 0 ? ['off', 'on'] : (argv[modesArg + 1] ?? '').split(',').map((m) => {
  if (!(m in MODES)) throw new Error(`--modes: unknown mode ${m}`);
  return m as Mode;
});

const LOAD_AT_START = loadavg().map((l) => l.toFixed(2)).join(', ');

async function main(): Promise<void> {
  const store = await startTestStore();
  const redis = await startRedis();
  const mon = await monitoredClient(store.url);
  const rows: string[] = [];
  const rates: Record<string, number[]> = {};
  try {
    const base = buildSeed(BASE_DOCS);
    let n = 0;
    for (let round = 1; round <= ROUNDS; round++) {
      for (const mix of ['usual', 'annotation-heavy'] as const) {
        const burst = buildBurst(WRITES, mix, base.targets);
        // Alternate which mode goes first, so that neither always meets a warmer store.
        const order: Mode[] = round % 2 === 1 ? MODE_LIST : [...MODE_LIST].reverse();
        for (const mode of order) {
          const name = `ab_${n++}`;
          const db = mon.client.db(name);
          await seedDb(db, base, { history: MODES[mode].env.RESPONSE_HISTORY_MAX !== '0' && !SEED_AS_BEFORE });
          if (MODES[mode].rule) {
            await createDatasetAdmin({ db }).put(DRAIN_DATASET, {
              fields: [{ name: 'prompt', type: 'text' }, { name: 'answer', type: 'text' }],
              questions: [{ name: 'helpful', type: 'number' }, { name: 'ranking', type: 'ranking', required: false }, { name: 'comment', type: 'text', required: false }],
              completion: { min_submitted: 2 },
            });
            // Each seeded record has its creator's submitted response alone: one of two.
            if (!SEED_AS_BEFORE) await db.collection<RecordDoc>(COLLECTIONS.records).updateMany({}, { $set: { status: 'pending' } });
          }
          const cpuBefore = storeCpuSeconds(store.postgresPort);
          const d = await drainBurst({ redisUrl: redis.url, storeUrl: store.url, mon, dbName: name, burst, seed: base, jobWrites: JOB_WRITES, env: MODES[mode].env });
          const storeCpuUs = ((storeCpuSeconds(store.postgresPort) - cpuBefore) * 1e6) / WRITES;
          const key = `${mix} ${mode}`;
          (rates[key] ??= []).push(d.rate);
          const storeTime = [...d.storeSeconds.entries()].sort((a, b) => b[1] - a[1]).map(([k, v]) => `${k} ${fmt(v, 1)} s (${d.commands.get(k) ?? 0})`).join(', ');
          const line = `| ${round} | ${mix} | ${mode} | ${fmt(d.rate)} | ${fmt(d.cpuUsPerWrite)} | ${fmt(storeCpuUs)} | ${fmt(d.seconds, 2)} | ${storeTime} | ${d.verified} |`;
          rows.push(line);
          progress(line);
          await db.dropDatabase();
        }
      }
    }
  } finally {
    await mon.client.close().catch(() => undefined);
    await redis.destroy();
    await store.stop();
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const summary = (['usual', 'annotation-heavy'] as const).flatMap((mix) => {
    const off = median(rates[`${mix} off`] ?? [Number.NaN]);
    return MODE_LIST.filter((m) => m !== 'off').map((mode) => {
      const modeRates = rates[`${mix} ${mode}`] ?? [];
      const rate = median(modeRates.length === 0 ? [Number.NaN] : modeRates);
      // Round by round: the same round's off and mode drains ran next to each other.
      const perRound = modeRates.map((r, k) => r / (rates[`${mix} off`]?.[k] ?? Number.NaN));
      const perRoundText = perRound.map((x) => x.toFixed(2)).join(', ');
      return `| ${mix} | ${mode} | ${fmt(off)} | ${fmt(rate)} | ${(rate / off).toFixed(2)}× | **${median(perRound.length === 0 ? [Number.NaN] : perRound).toFixed(2)}×** (${perRoundText}) |`;
    });
  });
  const text = [
    `# Drain with completion rule and history on vs off (${STARTED.toISOString()})`,
    '',
    `\`node --import tsx bench/completion-ab.ts ${argv.join(' ')}\``.replace(' `', '`'),
    '',
    `${WRITES} writes per burst, jobs of ${JOB_WRITES}, ${ROUNDS} rounds, each drain on a fresh database seeded with ${BASE_DOCS} documents${SEED_AS_BEFORE ? ', alike in every mode (records `submitted`, no `history`)' : ' as the worker stores them in each mode (with the rule, records `pending`; with history, `history` holding each response\'s version)'}.`,
    '"on": `RESPONSE_HISTORY_MAX=20` and `completion: {min_submitted: 2}` on the dataset; "off": `RESPONSE_HISTORY_MAX=0`, no definition.',
    '',
    'Median of the rounds (with two rounds, the higher); the per-round ratios below say more on a busy machine.',
    '',
    '| mix | mode | off writes/s | mode writes/s | mode / off (medians) | median of per-round ratios (per round) |',
    '|---|---|---|---|---|---|',
    ...summary,
    '',
    `Load average at the start: ${LOAD_AT_START}; at the end: ${loadavg().map((l) => l.toFixed(2)).join(', ')}. CPU: the bench process's (where the worker runs), user + system, per write; store CPU: FerretDB's, Redis's and the PostgreSQL cluster's, from /proc, over the whole of a drain's step: the burst queued, drained, and what is stored checked.`,
    '',
    '| round | mix | mode | writes/s | CPU µs/write | store CPU µs/write | s | store seconds by command and collection (commands) | verified |',
    '|---|---|---|---|---|---|---|---|---|',
    ...rows,
    '',
  ].join('\n');
  const dir = join(ROOT, 'bench', 'results', 'ab', 'completion-history');
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${STARTED.toISOString().replace(/[:.]/g, '-').replace(/-\d{3}Z$/, 'Z')}.md`);
  writeFileSync(file, text);
  process.stdout.write(`${text}\n(written to ${file})\n`);
}

await main();
