// The report of `npm run bench:drain` (Markdown), written after every pass so that a stopped run
// keeps what it measured.
import { cpus, loadavg } from 'node:os';
import { loadConfig } from '../../shared/config.js';
import type { PlainResult, RawResult } from '../scenarios/store-raw.js';
import type { DrainResult } from '../scenarios/worker-drain.js';
import type { TextbookDrainResult } from '../scenarios/textbook-drain.js';
import { INSERT_BATCH } from './drain-writes.js';
import { fmt, median } from './report.js';
import { countsText, sumCounts } from './store-monitor.js';

export interface RoundRow {
  readonly round: number;
  usual?: DrainResult;
  usualRaw?: RawResult;
  usualTextbook?: TextbookDrainResult;
  heavy?: DrainResult;
  heavyRaw?: RawResult;
  heavyTextbook?: TextbookDrainResult;
  plain?: PlainResult;
  big?: DrainResult;
}

/** A run of the drain benchmark: its settings and what it measured so far. */
export interface DrainRun {
  /** Writes per queued job (`--job-writes`). */
  jobWrites: number;
  readonly command: string;
  readonly writes: number;
  readonly seedDocs: number;
  readonly baseDocs: number;
  readonly roundsRequested: number;
  backend: string;
  bigSeedText: string;
  readonly rounds: RoundRow[];
}

/** CPU µs per write, or – when it was not read. */
const fmtCpu = (x: number) => (Number.isFinite(x) ? fmt(x) : '–');

/** Ratios: two decimals, or two significant digits when far below 1. */
const fmtRatio = (x: number | undefined) => (x !== undefined && Number.isFinite(x) ? (x < 0.1 ? x.toPrecision(2) : x.toFixed(2)) : '–');

export function renderDrainReport(run: DrainRun, final: boolean): string {
  const { rounds, writes: WRITES } = run;
  const lines: string[] = [];
  const ratios = (pick: (row: RoundRow) => number | undefined) => rounds.map(pick).filter((x): x is number => x !== undefined && Number.isFinite(x));
  const usualRatios = ratios((x) => (x.usual && x.usualRaw ? x.usual.rate / x.usualRaw.rate : undefined));
  const heavyRatios = ratios((x) => (x.heavy && x.heavyRaw ? x.heavy.rate / x.heavyRaw.rate : undefined));
  const usualTbRatios = ratios((x) => (x.usual && x.usualTextbook ? x.usual.rate / x.usualTextbook.rate : undefined));
  const heavyTbRatios = ratios((x) => (x.heavy && x.heavyTextbook ? x.heavy.rate / x.heavyTextbook.rate : undefined));
  // The store's CPU per write, raw's over the drain's: like the rates' ratio (above 1 = the drain asks less of the store), but not moved by a round's wall-time noise.
  const usualCpuRatios = ratios((x) => (x.usual && x.usualRaw ? x.usualRaw.storeCpuUsPerWrite / x.usual.storeCpuUsPerWrite : undefined));
  const heavyCpuRatios = ratios((x) => (x.heavy && x.heavyRaw ? x.heavyRaw.storeCpuUsPerWrite / x.heavy.storeCpuUsPerWrite : undefined));
  const plainRatios = ratios((x) => (x.usual && x.plain ? x.usual.rate / x.plain.rate : undefined));
  const bigRatios = ratios((x) => (x.usual && x.big ? x.big.rate / x.usual.rate : undefined));
  const cpw = (d: DrainResult | undefined) => (d === undefined ? undefined : sumCounts(d.commands) / WRITES);
  const verdict = (m: number | undefined, target: number) => (m !== undefined && Number.isFinite(m) ? (m >= target ? `meets ≥ ${target}×` : `below ${target}×`) : '–');

  lines.push(`# Worker drain benchmark (issue 10)${final ? '' : ' — PARTIAL (run in progress or stopped)'}`, '');
  lines.push(`- Command: \`${run.command}\``);
  lines.push(`- Store: ${run.backend}; Redis: private redis-server (devkit/servers.ts startRedis, no persistence)`);
  lines.push(`- Machine: ${cpus().length} × ${cpus()[0]?.model ?? '?'}, load average at start ${loadavg().map((x) => x.toFixed(1)).join(' ')} (shared with other work)`);
  lines.push(`- N = ${fmt(WRITES)} writes per burst, jobs of ${run.jobWrites} writes (deflated, as the API queues them), worker concurrency ${process.env['WORKER_CONCURRENCY'] ?? 'the default of WORKER_CONCURRENCY'}, ${run.roundsRequested} rounds requested, ${rounds.length} run`);
  lines.push(`- Every drain/raw pass runs on a fresh database holding ${fmt(run.baseDocs)} documents (${fmt(run.baseDocs / 2)} records + their responses); updates target those responses (random, repeats allowed).`);
  lines.push(`- Large store: ${fmt(run.seedDocs)} documents seeded with insertMany (${run.bigSeedText}); its drains add to it round after round.`);
  lines.push(`- Raw: insertMany of the new records and responses (batches of ${INSERT_BATCH}) + the distinct final updates as \`updateOne({_id}, {$set})\` in one unordered bulkWrite (as issue 21 defines the store's plain operations), for the same final documents as the worker's: with its default RESPONSE_HISTORY_MAX (${loadConfig({}).responseHistoryMax}), new responses are inserted with their history and each update sets the response's final history (the seeded version and every version of the burst, cut at the cap) in the same \`$set\`. No ordering or lookups.`);
  lines.push(`- Textbook worker (bench/peers/textbook-worker.ts): the same burst queued one job per write (as the textbook API queues it), a BullMQ Worker at concurrency 16 doing \`insertOne\` of the record and one upsert of the response per job, same store, same seeded database; timed the same way.`);
  lines.push(`- Worker CPU µs/write: user + system CPU of the bench process (the worker, or the textbook worker, runs in it) over the drain, per write (process.cpuUsage); it includes the bench's command monitor, the same for both.`);
  lines.push(`- Store CPU µs/write: user + system CPU of the store's processes (the PostgreSQL cluster, FerretDB, and Redis, which only the worker and the textbook worker use) over the same window, from /proc (bench/lib/proc-cpu.ts), per write. The rate's ratio moves with what else the machine runs during a round; this one does not.`);
  lines.push(`- Drain timing: from the worker's start (all jobs already queued, store prepared) to the last job completed; then the store is checked (counts, and the final \`seq\` of every response touched).`);
  lines.push('');
  lines.push('| | median | per round | target |', '|---|---|---|---|');
  lines.push(`| usual (10% updates): drain / raw | ${fmtRatio(median(usualRatios))}× | ${usualRatios.map(fmtRatio).join(', ')} | ${verdict(median(usualRatios), 0.8)} |`);
  lines.push(`| annotation-heavy (50% updates): drain / raw | ${fmtRatio(median(heavyRatios))}× | ${heavyRatios.map(fmtRatio).join(', ')} | ${verdict(median(heavyRatios), 0.8)} |`);
  lines.push(`| usual: store CPU per write, raw / drain | ${fmtRatio(median(usualCpuRatios))}× | ${usualCpuRatios.map(fmtRatio).join(', ')} | |`);
  lines.push(`| annotation-heavy: store CPU per write, raw / drain | ${fmtRatio(median(heavyCpuRatios))}× | ${heavyCpuRatios.map(fmtRatio).join(', ')} | |`);
  lines.push(`| usual: drain / textbook worker's drain | ${fmtRatio(median(usualTbRatios))}× | ${usualTbRatios.map(fmtRatio).join(', ')} | ${verdict(median(usualTbRatios), 1.5)} |`);
  lines.push(`| annotation-heavy: drain / textbook worker's drain | ${fmtRatio(median(heavyTbRatios))}× | ${heavyTbRatios.map(fmtRatio).join(', ')} | ${verdict(median(heavyTbRatios), 1.5)} |`);
  lines.push(`| usual drain / plain insertMany of as many documents | ${fmtRatio(median(plainRatios))}× | ${plainRatios.map(fmtRatio).join(', ')} | |`);
  lines.push(`| usual drain, ${fmt(run.seedDocs)}-doc store / ${fmt(run.baseDocs)}-doc store | ${fmtRatio(median(bigRatios))}× | ${bigRatios.map(fmtRatio).join(', ')} | ${verdict(median(bigRatios), 0.8)} |`);
  lines.push('');
  lines.push('| round | pass | seconds | writes/s | worker CPU µs/write | store CPU µs/write | store commands | commands / write | check |', '|---|---|---|---|---|---|---|---|---|');
  for (const row of rounds) {
    const d = (name: string, x: DrainResult | undefined) => {
      if (x) lines.push(`| ${row.round} | ${name} | ${fmt(x.seconds, 1)} | ${fmt(x.rate)} | ${fmt(x.cpuUsPerWrite)} | ${fmtCpu(x.storeCpuUsPerWrite)} | ${sumCounts(x.commands)} | ${fmt(cpw(x)!, 3)} | ${x.verified}; stale ${x.summary.stale}, dead-lettered ${x.summary.dead_lettered}, failed attempts ${x.failedAttempts} |`);
    };
    const rw = (name: string, x: RawResult | undefined) => {
      if (x) lines.push(`| ${row.round} | ${name} | ${fmt(x.seconds, 1)} (inserts ${fmt(x.insertSeconds, 1)}, ${x.updates} updates ${fmt(x.updateSeconds, 1)}) | ${fmt(x.rate)} | – | ${fmtCpu(x.storeCpuUsPerWrite)} | ${sumCounts(x.commands)} | ${fmt(sumCounts(x.commands) / WRITES, 3)} | ${x.verified} |`);
    };
    const tb = (name: string, x: TextbookDrainResult | undefined) => {
      if (x) lines.push(`| ${row.round} | ${name} | ${fmt(x.seconds, 1)} | ${fmt(x.rate)} | ${fmt(x.cpuUsPerWrite)} | ${fmtCpu(x.storeCpuUsPerWrite)} | ${sumCounts(x.commands)} | ${fmt(sumCounts(x.commands) / WRITES, 3)} | ${x.verified}; failed attempts ${x.failedAttempts} |`);
    };
    d('usual drain', row.usual);
    rw('usual raw', row.usualRaw);
    tb('usual textbook worker', row.usualTextbook);
    d('heavy drain', row.heavy);
    rw('heavy raw', row.heavyRaw);
    tb('heavy textbook worker', row.heavyTextbook);
    if (row.plain) lines.push(`| ${row.round} | plain insertMany (${fmt(row.plain.docs)} docs) | ${fmt(row.plain.seconds, 1)} | ${fmt(row.plain.rate)} | – | | | | |`);
    d(`usual drain, ${fmt(run.seedDocs)}-doc store`, row.big);
  }
  lines.push('');
  lines.push('Store commands by name and collection (drain passes, last round):', '');
  const last = rounds[rounds.length - 1];
  for (const [name, x] of [['usual', last?.usual], ['heavy', last?.heavy], ['usual, large store', last?.big]] as const) {
    if (x) lines.push(`- ${name}: ${countsText(x.commands)}; store seconds by command and collection (summed over concurrent commands): ${[...x.storeSeconds.entries()].sort((a, b) => b[1] - a[1]).map(([k, v]) => `${k} ${fmt(v, 1)}`).join(', ')}`);
  }
  lines.push('');
  return lines.join('\n');
}
