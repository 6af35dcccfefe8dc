// `npm run bench:webhooks`: the worker's drain rate with one webhook endpoint subscribed to every
// event (a local receiver answering 200) against the same burst without, in the same run,
// alternating which goes first; the median of the rounds of each and their ratio.
//
//   node --import tsx bench/webhooks.ts [--writes N] [--rounds N]
//
// The API's accept path does not change with webhooks (events are built by the worker's store
// round), so the drain is what an endpoint costs. Each pass gets a fresh database seeded with the
// same 10,000 documents; the burst is the drain bench's usual mix (bench/lib/drain-writes.ts).
import { mkdirSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { startRedis } from '../devkit/servers.js';
import { COLLECTIONS } from '../shared/mongo.js';
import { buildBurst, buildSeed, seedDb } from './lib/drain-writes.js';
import { fmt } from './lib/report.js';
import { progress, ROOT, STARTED } from './lib/runner.js';
import { startTestStore } from './lib/services.js';
import { storeCpuSeconds } from './lib/proc-cpu.js';
import { startBenchReceiver } from './lib/webhook-receiver.js';
import { countsText, monitoredClient, sumCounts } from './lib/store-monitor.js';
import { drainBurst } from './scenarios/worker-drain.js';
import { wholeNumberArg } from './lib/args.js';

const argv = process.argv.slice(2);
const num = (name: string, def: number): number => wholeNumberArg(argv, name, def);
const WRITES = num('--writes', 10_000);
const ROUNDS = num('--rounds', 3);
/** Stop the worker as soon as the burst is drained, without waiting for the deliveries (for a CPU profile of the drain alone). */
const DRAIN_ONLY = argv.includes('--drain-only');
/** `--only on|off`: one side only (for a CPU profile of it); no ratio then. */
const ONLY = argv.includes('--only') ? argv[argv.indexOf('--only') + 1] : undefined;
const BASE_DOCS = 10_000;
/** WEBHOOK_* settings of this shell reach the worker (e.g. WEBHOOK_MAX_IN_FLIGHT=400 npm run bench:webhooks). */
const WEBHOOK_ENV = Object.fromEntries(Object.entries(process.env).filter((e): e is [string, string] => e[0].startsWith('WEBHOOK_') && e[1] !== undefined));

const median = (xs: readonly number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

async function main(): Promise<void> {
  const eventCount = async (db: string): Promise<number> => {
    const d = mon.client.db(db);
    const [batched] = await d.collection(COLLECTIONS.webhookBatches).aggregate<{ n: number }>([{ $group: { _id: null, n: { $sum: '$n' } } }]).toArray();
    return (await d.collection(COLLECTIONS.webhookOutbox).countDocuments()) + (batched?.n ?? 0);
  };
  progress(`writes ${WRITES}, rounds ${ROUNDS}`);
  const receiver = await startBenchReceiver();
  // Distinct webhook-ids received: every event delivered once it holds as many as the outbox.
  const receivedIds = receiver.ids;
  const url = receiver.url;
  const store = await startTestStore();
  const redis = await startRedis();
  const mon = await monitoredClient(store.url);
  const rows: { round: number; off: number; on: number; events: number; cpuOff: number; cpuOn: number; storeOff: number; storeOn: number; cmdOff: number; cmdOn: number; deliveredInDrain: number; allDeliveredS: number; cpuAll: number; storeAll: number }[] = [];
  const commandsOn = new Map<string, number>();
  try {
    const base = buildSeed(BASE_DOCS);
    let n = 0;
    for (let round = 1; round <= ROUNDS; round++) {
      const burst = buildBurst(WRITES, 'usual', base.targets);
      const row = { round, off: 0, on: 0, events: 0, cpuOff: 0, cpuOn: 0, storeOff: 0, storeOn: 0, cmdOff: 0, cmdOn: 0, deliveredInDrain: 0, allDeliveredS: 0, cpuAll: 0, storeAll: 0 };
      for (const variant of round % 2 === 1 ? (['off', 'on'] as const) : (['on', 'off'] as const)) {
        if (ONLY !== undefined && variant !== ONLY) continue;
        const db = `webhooks_${n++}`;
        await seedDb(mon.client.db(db), base);
        const storeCpu0 = storeCpuSeconds(store.postgresPort);
        let storeDrained = 0;
        receivedIds.clear();
        const started = process.hrtime.bigint();
        const cpu0 = process.cpuUsage();
        // After the drain, with the worker still running: the time until every event appended is delivered, and the CPU until then.
        const afterDrain = async () => {
          storeDrained = storeCpuSeconds(store.postgresPort);
          if (variant === 'off' || DRAIN_ONLY) return;
          row.deliveredInDrain = receivedIds.size;
          // Events in the outbox and still in their batches (worker/webhook-fan-out.ts); counted again as they
          // are delivered: an event being moved can be in both for a moment.
          let events = await eventCount(db);
          const bound = Date.now() + 600_000;
          while (Date.now() < bound) {
            while (receivedIds.size < events && Date.now() < bound) await new Promise((r) => setTimeout(r, 50));
            events = await eventCount(db);
            if (receivedIds.size >= events) break;
          }
          row.allDeliveredS = Number(process.hrtime.bigint() - started) / 1e9;
          const cpu = process.cpuUsage(cpu0);
          row.cpuAll = (cpu.user + cpu.system) / WRITES;
          row.storeAll = ((storeCpuSeconds(store.postgresPort) - storeCpu0) * 1e6) / WRITES;
          if (receivedIds.size < events) progress(`only ${receivedIds.size} of ${events} events delivered after 600 s`);
          // The store's work between the drain's end and the last delivery: delivering only.
          const commands = mon.take();
          progress(`round ${round}: after the drain until every event was delivered: ${countsText(commands)}; store seconds: ${[...mon.lastSeconds()].sort((a, b) => b[1] - a[1]).map(([k, x]) => `${k} ${fmt(x, 1)}`).join(', ')}`);
        };
        const d = await drainBurst({ redisUrl: redis.url, storeUrl: store.url, mon, dbName: db, burst, seed: base, afterDrain, env: WEBHOOK_ENV, ...(variant === 'on' ? { webhookUrl: url } : {}) });
        row[variant] = d.rate;
        // The store's (PostgreSQL, FerretDB) and Redis's CPU over the drain (from the queueing of the burst on).
        const storeUs = ((storeDrained - storeCpu0) * 1e6) / WRITES;
        row[variant === 'on' ? 'storeOn' : 'storeOff'] = storeUs;
        // CPU of this process (the worker runs in it) and store commands per write: what limits the drain.
        row[variant === 'on' ? 'cpuOn' : 'cpuOff'] = d.cpuUsPerWrite;
        row[variant === 'on' ? 'cmdOn' : 'cmdOff'] = sumCounts(d.commands) / WRITES;
        if (variant === 'on') for (const [k, c] of d.commands) commandsOn.set(k, (commandsOn.get(k) ?? 0) + c);
        if (variant === 'on') row.events = await eventCount(db);
        progress(`round ${round} webhooks ${variant}: ${fmt(d.rate)} writes/s in ${fmt(d.seconds, 1)} s, ${fmt(d.cpuUsPerWrite)} µs CPU/write, store+Redis ${fmt(row[variant === 'on' ? 'storeOn' : 'storeOff'])} µs CPU/write, ${fmt(sumCounts(d.commands) / WRITES, 2)} store commands/write (${countsText(d.commands)}; store seconds: ${[...d.storeSeconds].sort((a, b) => b[1] - a[1]).map(([k, x]) => `${k} ${fmt(x, 1)}`).join(', ')}), ${d.verified}${variant === 'on' ? `, ${row.events} events in the outbox, ${row.deliveredInDrain} delivered during the drain, all delivered ${fmt(row.allDeliveredS, 1)} s after the start (worker ${fmt(row.cpuAll)}, store+Redis ${fmt(row.storeAll)} µs CPU/write until then), ${receiver.received()} requests received so far` : ''}`);
        await mon.client.db(db).dropDatabase();
      }
      rows.push(row);
    }
  } finally {
    await mon.client.close().catch(() => undefined);
    await redis.destroy();
    await store.stop();
    receiver.close();
  }
  const off = median(rows.map((r) => r.off));
  const on = median(rows.map((r) => r.on));
  const stamp = STARTED.toISOString().replace(/[:.]/g, '-').replace(/-\d{3}Z$/, 'Z');
  const lines = [
    `# Drain with and without one webhook endpoint, ${STARTED.toISOString()}`,
    '',
    `\`node --import tsx bench/webhooks.ts ${argv.join(' ')}\`: ${WRITES} writes (usual mix) per pass into a store seeded with ${BASE_DOCS} documents, ${ROUNDS} rounds, order alternating.`,
    '',
    '| round | without (writes/s) | with one endpoint (writes/s) | ratio | CPU µs/write without / with | store+Redis CPU µs/write without / with | store commands/write without / with | events appended |',
    '|---|---|---|---|---|---|---|---|',
    ...rows.map((r) => `| ${r.round} | ${fmt(r.off)} | ${fmt(r.on)} | ${fmt(r.on / r.off, 2)} | ${fmt(r.cpuOff)} / ${fmt(r.cpuOn)} | ${fmt(r.storeOff)} / ${fmt(r.storeOn)} | ${fmt(r.cmdOff, 2)} / ${fmt(r.cmdOn, 2)} | ${r.events} |`),
    `| **median** | **${fmt(off)}** | **${fmt(on)}** | **${fmt(on / off, 2)}** (per-round ratios: median ${fmt(median(rows.map((r) => r.on / r.off)), 2)}) | ${fmt(median(rows.map((r) => r.cpuOff)))} / ${fmt(median(rows.map((r) => r.cpuOn)))} | ${fmt(median(rows.map((r) => r.storeOff)))} / ${fmt(median(rows.map((r) => r.storeOn)))} | | |`,
    '',
    'Deliveries, with the endpoint: how many events reached the receiver while the burst drained, and how long from the start until every one had (the worker kept running after the drain); CPU per write over that whole time.',
    '',
    '| round | events | delivered during the drain | all delivered after (s) | events/s delivered, start to last | worker CPU µs/write until then | store+Redis CPU µs/write until then |',
    '|---|---|---|---|---|---|---|',
    ...rows.map((r) => `| ${r.round} | ${r.events} | ${r.deliveredInDrain} | ${fmt(r.allDeliveredS, 1)} | ${fmt(r.events / r.allDeliveredS)} | ${fmt(r.cpuAll)} | ${fmt(r.storeAll)} |`),
    `| **median** | | | **${fmt(median(rows.map((r) => r.allDeliveredS)), 1)}** | **${fmt(median(rows.map((r) => r.events / r.allDeliveredS)))}** | ${fmt(median(rows.map((r) => r.cpuAll)))} | ${fmt(median(rows.map((r) => r.storeAll)))} |`,
    '',
    `Store commands during the drains with webhooks, all rounds: ${countsText(commandsOn)}. Load average at the end: ${loadavg().map((l) => l.toFixed(2)).join(' ')}.`,
    '',
  ];
  const outDir = join(ROOT, 'bench', 'results');
  mkdirSync(outDir, { recursive: true });
  const out = join(outDir, `webhooks-${stamp}.md`);
  writeFileSync(out, lines.join('\n'));
  process.stdout.write(`${lines.join('\n')}\n(written to ${out})\n`);
}

await main();
