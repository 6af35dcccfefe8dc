import {
  DESIGNS,
  DESIGN_LABELS,
  DESIGN_SHORT,
  type BenchResult,
  type BurstResult,
  type CpuPerRequest,
  type Design,
  type DesignMedians,
  type RatioSummary,
  type Round,
  type ScaleResult,
  type SustainedResult,
  type Target,
} from './types.js';

export function median(values: readonly (number | undefined)[]): number | undefined {
  const v = values.filter((x): x is number => x !== undefined && Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return undefined;
  const mid = Math.floor(v.length / 2);
  return v.length % 2 === 1 ? v[mid] : (v[mid - 1]! + v[mid]!) / 2;
}

const finite = (values: readonly (number | undefined)[]) => values.filter((x): x is number => x !== undefined && Number.isFinite(x));

export function fmt(n: number | undefined, digits = 0): string {
  if (n === undefined || !Number.isFinite(n)) return '–';
  return n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

const fmtRatio = (n: number | undefined) => (n === undefined || !Number.isFinite(n) ? '–' : `${n.toFixed(2)}×`);
const mb = (kb: number) => fmt(kb / 1024, 0);

function div(a: number | undefined, b: number | undefined): number | undefined {
  if (a === undefined || b === undefined || !Number.isFinite(a) || !Number.isFinite(b) || b === 0) return undefined;
  return a / b;
}

type RatioTarget = { op: '>=' | '<='; bound: number };

/** One ratio of a round: a numerator and a denominator read from it. */
function ratio(key: string, label: string, numerator: (r: Round) => number | undefined, denominator: (r: Round) => number | undefined, target?: RatioTarget) {
  return { key, label, of: (r: Round) => div(numerator(r), denominator(r)), ...(target === undefined ? {} : { target }) };
}

const rps = (design: Design) => (r: Round) => r.runs[design]?.rps;
const cpu = (design: Design, role = 'server') => (r: Round) => r.runs[design]?.cpuUsPerRequest[role];

/** The per-round ratios the issue's targets are about, plus a few for context. */
const RATIO_DEFS: readonly { key: string; label: string; of: (r: Round) => number | undefined; target?: RatioTarget }[] = [
  ratio('cpu_vs_textbook', 'server CPU µs per accepted write (d) / textbook peer (b)', cpu('project'), cpu('textbook'), { op: '<=', bound: 0.7 }),
  ratio('cpu_vs_raw', 'server CPU µs per accepted write (d) / raw node:http (r)', cpu('project'), cpu('raw_http'), { op: '<=', bound: 1.5 }),
  ratio('redis_cpu_vs_textbook', 'Redis CPU µs per write (d) / textbook peer (b)', cpu('project', 'redis'), cpu('textbook', 'redis'), { op: '<=', bound: 0.1 }),
  ratio('p99_vs_textbook', 'p99 (d) / p99 textbook peer (b)', (r) => r.runs.project?.latencyMs.p99, (r) => r.runs.textbook?.latencyMs.p99, { op: '<=', bound: 1 }),
  ratio('accept_vs_textbook', 'accept rate (d) / textbook peer (b)', rps('project'), rps('textbook'), { op: '>=', bound: 1.5 }),
  ratio('accept_vs_raw', 'accept rate (d) / raw node:http (r)', rps('project'), rps('raw_http')),
  ratio('accept_vs_ceiling', 'accept rate (d) / this app without enqueueing (a)', rps('project'), rps('ceiling')),
  ratio('ab_vs_project', "accept rate (d') with the --ab settings / (d)", rps('project_b'), rps('project')),
  ratio('ab_cpu_vs_project', "server CPU µs per write (d') / (d)", cpu('project_b'), cpu('project')),
  ratio('store_vs_accept', 'worker store rate / accept rate (d)', (r) => r.drain?.rate, rps('project'), { op: '>=', bound: 1 }),
  ratio('store_vs_raw', 'worker store rate / raw insertMany rate', (r) => r.drain?.rate, (r) => r.raw?.rate, { op: '>=', bound: 0.8 }),
  ratio('redis_vs_payload', 'Redis bytes per queued write / JSON body', (r) => r.projectRedis?.bytesPerWrite, (r) => r.projectRedis?.payloadBytes, { op: '<=', bound: 0.6 }),
  ratio('live_accept_vs_ceiling', 'accept rate with worker draining on the same cores / ceiling (a)', rps('project_live'), rps('ceiling')),
  ratio('webhook_accept_vs_live', 'accept rate with the worker draining and one webhook endpoint / without the endpoint (issue 24)', rps('project_webhook'), rps('project_live'), { op: '>=', bound: 0.9 }),
  ratio('webhook_store_vs_live', 'worker store rate during that load, with one webhook endpoint / without (issue 24)', (r) => r.liveWebhook?.storeRateDuringLoad, (r) => r.live?.storeRateDuringLoad, { op: '>=', bound: 0.9 }),
  ratio('live_store_vs_accept', 'worker store rate during that load / its accept rate', (r) => r.live?.storeRateDuringLoad, rps('project_live')),
  ratio('textbook_vs_ceiling', 'textbook (b) / ceiling (a)', rps('textbook'), rps('ceiling')),
  ratio('direct_vs_ceiling', 'direct (c) / ceiling (a)', rps('direct'), rps('ceiling')),
  ratio('textbook_redis_vs_payload', 'textbook (b): Redis bytes per queued write / JSON body', (r) => r.textbookRedis?.bytesPerWrite, (r) => r.textbookRedis?.payloadBytes),
];

export function roundRatios(r: Round): Record<string, number | undefined> {
  return Object.fromEntries(RATIO_DEFS.map((def) => [def.key, def.of(r)]));
}

function meetsTarget(value: number | undefined, t: RatioTarget | undefined): boolean | undefined {
  if (t === undefined || value === undefined) return undefined;
  return t.op === '>=' ? value >= t.bound : value <= t.bound;
}

/** The rounds in which no design was starved; every round when none was clean (the report says so). */
export function cleanRounds(rounds: readonly Round[]): Round[] {
  const clean = rounds.filter((r) => (r.starved ?? []).length === 0);
  return clean.length > 0 ? clean : [...rounds];
}

/** The designs whose server waited for a CPU beyond the bound in round `r`. */
export function starvedIn(r: Round): Design[] {
  return DESIGNS.filter((d) => r.runs[d]?.starved === true);
}

export function summarize(
  allRounds: readonly Round[],
  bursts: readonly BurstResult[],
  sustained?: SustainedResult,
): { medians: Partial<Record<Design, DesignMedians>>; cleanRounds: number[]; ratios: RatioSummary[]; targets: Target[] } {
  const rounds = cleanRounds(allRounds);
  const medians: Partial<Record<Design, DesignMedians>> = {};
  for (const d of DESIGNS) {
    const runs = rounds.map((r) => r.runs[d]).filter((x) => x !== undefined);
    if (runs.length === 0) continue;
    const rps = finite(runs.map((x) => x.rps));
    const p99 = finite(runs.map((x) => x.latencyMs.p99));
    const cpu: CpuPerRequest = {};
    for (const role of new Set(runs.flatMap((x) => Object.keys(x.cpuUsPerRequest)))) cpu[role] = median(runs.map((x) => x.cpuUsPerRequest[role])) ?? Number.NaN;
    medians[d] = {
      rps: median(rps),
      rpsMin: rps.length > 0 ? Math.min(...rps) : undefined,
      rpsMax: rps.length > 0 ? Math.max(...rps) : undefined,
      p50: median(runs.map((x) => x.latencyMs.p50)),
      p99: median(p99),
      p99Min: p99.length > 0 ? Math.min(...p99) : undefined,
      p99Max: p99.length > 0 ? Math.max(...p99) : undefined,
      max: median(runs.map((x) => x.latencyMs.max)),
      non2xx: runs.reduce((a, x) => a + x.non2xx + x.errors, 0),
      cpuUsPerRequest: cpu,
      elu: median(runs.map((x) => x.elu)),
    };
  }
  const ratios: RatioSummary[] = RATIO_DEFS.map((def) => {
    const perRound = allRounds.map((r) => r.ratios[def.key]);
    return { key: def.key, label: def.label, perRound, median: median(rounds.map((r) => r.ratios[def.key])), ...(def.target === undefined ? {} : { target: def.target }) };
  });
  const targets: Target[] = ratios
    .filter((r) => r.target !== undefined)
    .map((r) => ({ name: r.label, value: fmtRatio(r.median), target: `${r.target!.op} ${r.target!.bound}×`, met: meetsTarget(r.median, r.target) }));

  if (bursts.length > 0) {
    const allExact = bursts.every((b) => b.exactlyOnce);
    const exactValue = bursts.map((b) => (b.drained ? `${fmt(b.storedRecords)} of ${fmt(b.serverAccepted)}` : `not drained in time: ${fmt(b.workerFinished)} of ${fmt(b.serverAccepted)} stored`)).join('; ');
    targets.push({ name: 'burst: every 200 stored exactly once', value: exactValue, target: 'stored = accepted, no dead letters', met: allExact });
    const badStatus = bursts.reduce((a, b) => a + b.errors + Object.entries(b.statusCodes).filter(([c]) => !c.startsWith('2') && c !== '503').reduce((s, [, n]) => s + n, 0), 0);
    targets.push({ name: 'burst: no non-2xx other than designed 503s', value: fmt(badStatus), target: '0', met: badStatus === 0 });
    const [first, second] = bursts;
    if (first !== undefined && second !== undefined) {
      const scale = second.size / first.size;
      const drainRatio = second.drainS / first.drainS;
      const bothDrained = first.drained && second.drained;
      targets.push({
        name: `burst: drain time scales linearly (${fmt(second.size)} vs ${fmt(first.size)})`,
        value: bothDrained ? `${drainRatio.toFixed(2)}× for ${scale.toFixed(2)}× the writes` : 'not drained in time',
        target: `${(scale * 0.75).toFixed(2)}–${(scale * 1.25).toFixed(2)}×`,
        met: bothDrained && drainRatio >= scale * 0.75 && drainRatio <= scale * 1.25,
      });
      const big = second.size > first.size ? second : first;
      const small = second.size > first.size ? first : second;
      const rssRatio = big.apiRssKb.peak / small.apiRssKb.peak;
      targets.push({ name: 'burst: API RSS stays flat', value: `peak ${mb(small.apiRssKb.peak)} MB → ${mb(big.apiRssKb.peak)} MB (${rssRatio.toFixed(2)}×)`, target: '≤ 1.25× when the burst grows', met: rssRatio <= 1.25 });
    }
  }
  if (sustained !== undefined) targets.push(sustainedTarget(sustained));
  return { medians, cleanRounds: rounds.map((r) => r.round), ratios, targets };
}

/** What the sustained scenario's rate is half of, in words. */
export const basisLabel = (of: SustainedResult['basisOf']): string => (of === 'accept' ? 'the max accept rate' : "the worker's drain rate alone");

/** The rule of the sustained scenario, in words. */
const sustainedRule = (s: SustainedResult) =>
  `max backlog over the last third of the samples ≤ ${s.boundFactor} × max over the first third + ${s.boundSlackJobs} jobs, and ≥ ${Math.round(s.minAcceptShare * 100)}% of the target rate accepted`;

function sustainedTarget(s: SustainedResult): Target {
  return {
    name: `backlog bounded for ${fmt(s.seconds)} s at half ${basisLabel(s.basisOf)}`,
    value:
      `${fmt(s.acceptedRps)} of ${fmt(s.targetRps)} req/s accepted; backlog start ${fmt(s.backlogStart)} / max ${fmt(s.backlogMax)} / end ${fmt(s.backlogEnd)} jobs ` +
      `(last third max ${fmt(s.lastThirdMax)}, first third max ${fmt(s.firstThirdMax)}${s.bounded ? '' : ': growing'})`,
    target: `last-third max ≤ ${s.boundFactor} × first-third max + ${s.boundSlackJobs} jobs; accepted ≥ ${Math.round(s.minAcceptShare * 100)}% of target`,
    met: s.met,
  };
}

const cpuCell = (c: CpuPerRequest, role: string) => (c[role] === undefined || !Number.isFinite(c[role]) ? '–' : fmt(c[role], 0));

export function renderMarkdown(res: BenchResult): string {
  const out: string[] = [];
  const o = res.options;
  out.push(`# feedback-ingest benchmark, ${res.startedAt}`);
  out.push('');
  out.push(`Command: \`${res.command}\` · wall time ${fmt(res.wallSeconds / 60, 1)} min · ${res.machine['cpus']} CPUs (${res.machine['cpuModel']}) · Node ${res.machine['node']} · ${res.machine['redis']} · FerretDB ${res.machine['ferretdb']} on PostgreSQL 15 + DocumentDB`);
  out.push('');
  out.push(
    `${o['rounds']} rounds × ${o['durationS']} s per design, designs alternating (order rotated each round), ${res.mix.connections} connections, ${String(o['loadgen'])} on loopback on the same cores. ` +
      `Body mix: ${Math.round(res.mix.recordShare * 100)}% \`/feedback-record\` (${res.mix.recordBodyBytes} B), ${Math.round((1 - res.mix.recordShare) * 100)}% \`/feedback-response\` (${res.mix.responseBodyBytes} B) to stored records; mean ${fmt(res.mix.meanBodyBytes)} B.`,
  );
  const env = Object.entries(res.projectEnv);
  out.push('');
  out.push(`Project settings: ${env.length === 0 ? 'defaults' : env.map(([k, v]) => `\`${k}=${v}\``).join(', ')}; LOG_LEVEL=${String(o['logLevel'])} (to /dev/null).${o['abDist'] === undefined ? '' : ` (d') runs the build in \`${String(o['abDist'])}\`${Object.keys(o['ab'] ?? {}).length > 0 ? ' with the --ab settings' : ''}.`}`);
  out.push('');
  const starvedRounds = res.rounds.filter((r) => (r.starved ?? []).length > 0);
  const allStarved = starvedRounds.length === res.rounds.length && res.rounds.length > 0;
  out.push(
    `Starved: a design is starved in a round when its server's main thread waited for a CPU (runnable but not running, /proc/<pid>/schedstat) for more than ${fmt(Number(o['starvedWaitPct']))}% of the run's wall time (a design whose worker drains on the same cores waits for it by design: it is starved when processes outside the bench used more than ${fmt(Number(o['starvedForeignPct']))}% of the machine); ` +
      `such a round is reported below and left out of every median. ${
        starvedRounds.length === 0
          ? 'No round was starved.'
          : `Starved: ${starvedRounds.map((r) => `round ${r.round} (${(r.starved ?? []).map((d) => DESIGN_SHORT[d]).join(', ')})`).join('; ')}.${allStarved ? ' **No round was clean: the medians below are over all rounds and only indicative.**' : ''}`
      } Medians over round${res.cleanRounds.length === 1 ? '' : 's'} ${res.cleanRounds.join(', ')}.`,
  );
  out.push('');
  const scope = allStarved ? `all rounds (${res.cleanRounds.join(', ')}; none was clean: indicative only)` : `the clean rounds (${res.cleanRounds.join(', ')})`;
  out.push(`## Designs (medians over ${scope})`);
  out.push('');
  out.push('| Design | server CPU µs per accepted write | Redis CPU µs/write | accepted req/s (min–max) | p50 ms | p99 ms | max ms | non-2xx + errors | store (FerretDB + PostgreSQL) µs/write | worker µs/write | load gen µs/write | server ELU |');
  out.push('|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const d of DESIGNS) {
    const m = res.medians[d];
    if (m === undefined) continue;
    out.push(
      `| ${DESIGN_LABELS[d]} | **${cpuCell(m.cpuUsPerRequest, 'server')}** | ${cpuCell(m.cpuUsPerRequest, 'redis')} | ${fmt(m.rps)} (${fmt(m.rpsMin)}–${fmt(m.rpsMax)}) | ${fmt(m.p50, 1)} | ${fmt(m.p99, 1)} | ${fmt(m.max, 0)} | ${fmt(m.non2xx)} | ${cpuCell(m.cpuUsPerRequest, 'ferretdb')} | ${cpuCell(m.cpuUsPerRequest, 'worker')} | ${cpuCell(m.cpuUsPerRequest, 'loadgen')} | ${fmt(m.elu, 2)} |`,
    );
  }
  out.push('');
  out.push(`## Targets (median of per-round ratios, over ${scope})`);
  out.push('');
  out.push('| Target | value | target | met |');
  out.push('|---|---|---|---|');
  for (const t of res.targets) out.push(`| ${t.name} | ${t.value} | ${t.target} | ${t.met === undefined ? '–' : t.met ? 'yes' : '**no**'} |`);
  out.push('');
  out.push('## Per design and round');
  out.push('');
  out.push('Server CPU: user+system of every process of the server (/proc/<pid>/stat) over the run, per write it answered 200; Redis CPU: redis-server over the same run, per the same writes; load gen: wrk and the bench process, per write and as a share of the machine.');
  out.push('');
  out.push('| Round | Design | server CPU µs/write | Redis CPU µs/write | accepted req/s | p50 / p99 ms | load gen µs/write (% of machine) | server cores used | server waited for a CPU | machine busy (foreign) | ELU |');
  out.push('|---|---|---|---|---|---|---|---|---|---|---|');
  for (const r of res.rounds) {
    for (const d of r.order) {
      const x = r.runs[d];
      if (x === undefined) continue;
      out.push(
        `| ${r.round}${(r.starved ?? []).length > 0 ? ' (left out)' : ''} | ${DESIGN_SHORT[d]} | **${cpuCell(x.cpuUsPerRequest, 'server')}** | ${cpuCell(x.cpuUsPerRequest, 'redis')} | ${fmt(x.rps)} | ${fmt(x.latencyMs.p50, 1)} / ${fmt(x.latencyMs.p99, 1)} | ${cpuCell(x.cpuUsPerRequest, 'loadgen')} (${fmt(x.loadgenCpuPct)}%) | ${fmt(x.serverCores, 2)} | ${fmt(x.serverWaitPct)}%${x.starved ? ' **starved**' : ''} | ${fmt(x.machineBusyPct)}% (${fmt(x.foreignCpuPct)}%) | ${fmt(x.elu, 2)} |`,
      );
    }
  }
  out.push('');
  out.push('## Ratios per round');
  out.push('');
  out.push(`Medians over ${scope}.`);
  out.push('');
  out.push(`| Ratio | ${res.rounds.map((r) => `round ${r.round}${(r.starved ?? []).length > 0 ? ' (starved)' : ''}`).join(' | ')} | median |`);
  out.push(`|---|${res.rounds.map(() => '---|').join('')}---|`);
  for (const r of res.ratios) out.push(`| ${r.label} | ${r.perRound.map(fmtRatio).join(' | ')} | **${fmtRatio(r.median)}** |`);
  out.push('');
  out.push('## This project: the store side, per round');
  out.push('');
  out.push('| Round | accept req/s (API only) | worker alone: writes/s (stored / queued) | mean job size | ms of MongoDB writes per job | raw insertMany writes/s | Redis B/queued write | JSON body B | job JSON B/write | Redis B/job | accept req/s, worker live | stored writes/s during it | backlog at end | lag p50 / p99 ms | responses stored; findOne {_id} / {_id, seq $lt} ms |');
  out.push('|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const r of res.rounds) {
    const d = r.drain;
    const drainCell = d === undefined ? '–' : `${fmt(d.rate)} (${fmt(d.writes)} / ${fmt(d.expected)}${d.drained ? '' : ', **not drained** in ' + fmt(d.seconds, 0) + ' s'})`;
    const lagCell = r.live === undefined ? '–' : `${fmt(r.live.lagP50Ms, 0)} / ${fmt(r.live.lagP99Ms, 0)}${r.live.drained ? '' : ' (stored writes only; **not drained**)'}`;
    const probe = r.storeProbe === undefined ? '–' : `${fmt(r.storeProbe.responses)}; ${fmt(r.storeProbe.idOnlyMs, 1)} / ${fmt(r.storeProbe.workerFilterMs, 1)}`;
    out.push(
      `| ${r.round} | ${fmt(r.runs.project?.rps)} | ${drainCell} | ${fmt(d?.meanJobSize, 1)} | ${fmt(d?.meanJobWriteMs, 0)} | ${fmt(r.raw?.rate)} | ${fmt(r.projectRedis?.bytesPerWrite)} | ${fmt(r.projectRedis?.payloadBytes)} | ${fmt(r.projectRedis?.jobJsonBytesPerWrite)} | ${fmt(r.projectRedis?.bytesPerJob)} | ${fmt(r.runs.project_live?.rps)} | ${fmt(r.live?.storeRateDuringLoad)} | ${fmt(r.live?.backlogAtEndWrites)} | ${lagCell} | ${probe} |`,
    );
  }
  if (res.rounds.some((r) => r.liveWebhook !== undefined)) {
    out.push('');
    out.push('## With one webhook endpoint (worker live), per round');
    out.push('');
    out.push('The same load as "(d) project+worker" with one endpoint subscribed to every event, registered just before the run and deleted after the drain. CPU µs per accepted write: the API, the worker, the store.');
    out.push('');
    out.push('| Round | accept req/s without / with | ratio | stored writes/s during the load without / with | ratio | CPU µs/write API | worker | store | lag p99 ms without / with | events received by the end of the drain |');
    out.push('|---|---|---|---|---|---|---|---|---|---|');
    for (const r of res.rounds) {
      const a = r.runs.project_live;
      const b = r.runs.project_webhook;
      const pair = (x: number | undefined, y: number | undefined, digits = 0) => `${fmt(x, digits)} / ${fmt(y, digits)}`;
      out.push(
        `| ${r.round} | ${pair(a?.rps, b?.rps)} | ${fmtRatio(r.ratios['webhook_accept_vs_live'])} | ${pair(r.live?.storeRateDuringLoad, r.liveWebhook?.storeRateDuringLoad)} | ${fmtRatio(r.ratios['webhook_store_vs_live'])} | ${pair(a?.cpuUsPerRequest['server'], b?.cpuUsPerRequest['server'])} | ${pair(a?.cpuUsPerRequest['worker'], b?.cpuUsPerRequest['worker'])} | ${pair(a?.cpuUsPerRequest['ferretdb'], b?.cpuUsPerRequest['ferretdb'])} | ${pair(r.live?.lagP99Ms, r.liveWebhook?.lagP99Ms)} | ${fmt(r.liveWebhook?.eventsReceived)} |`,
      );
    }
  }
  const tb = res.rounds.map((r) => r.textbookRedis).filter((x) => x !== undefined);
  if (tb.length > 0) {
    out.push('');
    out.push(`Textbook (b) for comparison: Redis ${fmt(median(tb.map((x) => x.bytesPerWrite)))} B per queued write (one job each), job JSON ${fmt(median(tb.map((x) => x.jobJsonBytesPerWrite)))} B.`);
  }
  const after = finite(res.rounds.map((r) => r.projectRedis?.usedAfterDrainBytes));
  if (after.length > 0) out.push(`Redis used_memory after each drain (completed jobs kept by KEEP_COMPLETED_JOBS, with their data): ${after.map((b) => `${fmt(b / 1048576, 0)} MB`).join(', ')}.`);
  if (res.bursts.length > 0) {
    out.push('');
    out.push('## Burst (worker live)');
    out.push('');
    out.push('| Records | conns | accepted (server) | stored records / responses | exactly once | non-2xx + errors | accept s (req/s) | p99 ms | all stored after s | tail after last answer s | peak backlog writes / jobs | API RSS MB before / peak / after | worker RSS peak MB | Redis peak MB |');
    out.push('|---|---|---|---|---|---|---|---|---|---|---|---|---|---|');
    for (const b of res.bursts) {
      const stored = b.drained ? `${fmt(b.storedRecords)} / ${fmt(b.storedResponses)}` : `**not drained**: ${fmt(b.workerFinished)} writes stored in ${fmt(b.drainS, 0)} s`;
      out.push(
        `| ${fmt(b.size)} | ${b.connections} | ${fmt(b.accepted)} (${fmt(b.serverAccepted)}) | ${stored} | ${b.exactlyOnce ? 'yes' : b.drained ? '**no**' : 'unknown'} | ${fmt(b.non2xx + b.errors)} | ${fmt(b.acceptS, 1)} (${fmt(b.acceptRps)}) | ${fmt(b.p99Ms, 0)} | ${b.drained ? fmt(b.drainS, 1) : '–'} | ${b.drained ? fmt(b.tailS, 1) : '–'} | ${fmt(b.peakBacklogWrites)} / ${fmt(b.peakBacklogJobs)} | ${mb(b.apiRssKb.before)} / ${mb(b.apiRssKb.peak)} / ${mb(b.apiRssKb.after)} | ${mb(b.workerRssKb.peak)} | ${fmt(b.redisUsedPeakBytes / 1048576, 0)} |`,
      );
    }
  }
  if (res.sustained !== undefined) {
    const s = res.sustained;
    out.push('');
    out.push(`## Sustained load (worker live): backlog bounded for ${fmt(s.seconds)} s at half ${basisLabel(s.basisOf)}: ${s.met ? 'met' : '**not met**'}`);
    out.push('');
    out.push(`| ${s.basisOf === 'accept' ? 'max accept req/s (d)' : 'worker drain alone, writes/s'} | target req/s | conns | offered req/s | accepted req/s (server 200s) | non-2xx + errors | p50 / p99 ms | backlog jobs start / max / end | first / last third max | bounded | stored writes/s | lag p50 / p99 ms (writes) | rest stored after s |`);
    out.push('|---|---|---|---|---|---|---|---|---|---|---|---|---|');
    const codes = Object.entries(s.statusCodes).filter(([c]) => !c.startsWith('2'));
    out.push(
      `| ${fmt(s.maxAcceptRps)} | ${fmt(s.targetRps)} | ${s.connections} | ${fmt(s.offeredRps)} | **${fmt(s.acceptedRps)}** (${fmt(s.serverAccepted)} in ${fmt(s.durationS, 1)} s) | ${fmt(s.non2xx + s.errors)}${codes.length > 0 ? ` ${JSON.stringify(Object.fromEntries(codes))}` : ''} | ${fmt(s.p50Ms, 1)} / ${fmt(s.p99Ms, 1)} | ${fmt(s.backlogStart)} / **${fmt(s.backlogMax)}** / ${fmt(s.backlogEnd)} | ${fmt(s.firstThirdMax)} / ${fmt(s.lastThirdMax)} | ${s.bounded ? 'yes' : '**no**'} | ${fmt(s.storeRate)} | ${fmt(s.lagP50Ms, 0)} / ${fmt(s.lagP99Ms, 0)} (${fmt(s.lagCount)}) | ${s.drained ? fmt(s.drainTailS, 2) : '**not drained**'} |`,
    );
    out.push('');
    out.push(`Bounded: ${sustainedRule(s)}. Backlog jobs, one sample a second from the start of the load and one when it stopped: ${s.backlogJobs.map((x) => fmt(x)).join(' ')}. Accepted writes not yet finished by the worker at the same instants: ${s.backlogWrites.map((x) => fmt(x)).join(' ')}.`);
  } else if (res.sustainedSkipped !== undefined) {
    out.push('');
    out.push(`## Sustained load: skipped (${res.sustainedSkipped})`);
  }
  if (res.scale !== undefined) out.push('', ...renderScale(res.scale));
  if (res.notes.length > 0) {
    out.push('');
    out.push('## How to read it');
    out.push('');
    for (const n of res.notes) out.push(`- ${n}`);
  }
  out.push('');
  out.push('![throughput and p99 per design](latest.svg)');
  out.push('');
  return out.join('\n');
}

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** Two bar charts side by side: accepted req/s and p99 latency per design, median bars with min–max whiskers. */
export function renderSvg(res: BenchResult): string {
  const designs = DESIGNS.filter((d) => res.medians[d]?.rps !== undefined);
  const rowH = 34;
  const top = 56;
  const labelW = 150;
  const panelW = 330;
  const gap = 60;
  const width = labelW + panelW * 2 + gap + 40;
  const height = top + designs.length * rowH + 40;
  const colors: Record<Design, string> = { raw_http: '#6c757d', ceiling: '#9aa5b1', textbook: '#e07a5f', direct: '#f2cc8f', project: '#3d85c6', project_live: '#81b29a', project_webhook: '#2a9d8f', project_b: '#5e60ce' };
  const maxRps = Math.max(1, ...designs.map((d) => res.medians[d]!.rpsMax ?? 0));
  const maxP99 = Math.max(1, ...designs.map((d) => res.medians[d]!.p99Max ?? 0));
  const parts: string[] = [];
  parts.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="Helvetica, Arial, sans-serif" font-size="12">`);
  parts.push(`<rect width="100%" height="100%" fill="#ffffff"/>`);
  parts.push(`<text x="10" y="20" font-size="14" font-weight="bold">${esc(`feedback-ingest benchmark, ${res.startedAt}`)}</text>`);
  parts.push(`<text x="10" y="38" fill="#555">${esc(`median of ${res.rounds.length} rounds; whiskers: min–max; ${res.mix.connections} connections, ${res.machine['cpus']} CPUs`)}</text>`);
  const panel = (x0: number, title: string, value: (m: DesignMedians) => [number | undefined, number | undefined, number | undefined], max: number, unit: string) => {
    parts.push(`<text x="${x0}" y="${top - 6}" font-weight="bold">${esc(title)}</text>`);
    designs.forEach((d, i) => {
      const m = res.medians[d]!;
      const [mid, lo, hi] = value(m);
      const y = top + i * rowH;
      const w = mid === undefined ? 0 : (mid / max) * panelW;
      parts.push(`<rect x="${x0}" y="${y + 6}" width="${w.toFixed(1)}" height="${rowH - 14}" fill="${colors[d]}"/>`);
      if (lo !== undefined && hi !== undefined) {
        const xl = x0 + (lo / max) * panelW;
        const xh = x0 + (hi / max) * panelW;
        const yc = y + rowH / 2 - 1;
        parts.push(`<line x1="${xl.toFixed(1)}" y1="${yc}" x2="${xh.toFixed(1)}" y2="${yc}" stroke="#333"/>`);
        parts.push(`<line x1="${xl.toFixed(1)}" y1="${yc - 5}" x2="${xl.toFixed(1)}" y2="${yc + 5}" stroke="#333"/>`);
        parts.push(`<line x1="${xh.toFixed(1)}" y1="${yc - 5}" x2="${xh.toFixed(1)}" y2="${yc + 5}" stroke="#333"/>`);
      }
      parts.push(`<text x="${(x0 + Math.max(w, hi === undefined ? 0 : (hi / max) * panelW) + 6).toFixed(1)}" y="${y + rowH / 2 + 3}">${esc(`${fmt(mid, unit === 'ms' ? 1 : 0)} ${unit}`)}</text>`);
    });
    parts.push(`<line x1="${x0}" y1="${top}" x2="${x0}" y2="${top + designs.length * rowH}" stroke="#999"/>`);
  };
  designs.forEach((d, i) => {
    parts.push(`<text x="10" y="${top + i * rowH + rowH / 2 + 3}">${esc(DESIGN_SHORT[d])}</text>`);
  });
  panel(labelW, 'accepted requests/s (higher is better)', (m) => [m.rps, m.rpsMin, m.rpsMax], maxRps * 1.15, 'req/s');
  panel(labelW + panelW + gap, 'p99 latency (lower is better)', (m) => [m.p99, m.p99Min, m.p99Max], maxP99 * 1.15, 'ms');
  parts.push(`<text x="10" y="${height - 12}" fill="#555">${esc('(d) project: API with its worker paused (as the ceiling has no worker); (d) project+worker: the worker drains on the same 2 cores.')}</text>`);
  parts.push('</svg>');
  return `${parts.join('\n')}\n`;
}

/** The scale scenario's section of the report. */
export function renderScale(s: ScaleResult): string[] {
  const out: string[] = [];
  out.push(`## Scale: 2 processes against 1 on ${s.cpus} cores (load average ${s.loadavgStart.join(' ')} at the start, ${s.loadavgEnd.join(' ')} at the end)`);
  out.push('');
  out.push(`Accept rate, WEB_CONCURRENCY=2 / 1: **${fmt(s.acceptRatio, 2)}×** (per round ${s.acceptRatioPerRound.map((x) => fmt(x, 2)).join(', ')}). Drain rate, 2 worker processes / 1: **${fmt(s.drainRatio, 2)}×** (per round ${s.drainRatioPerRound.map((x) => fmt(x, 2)).join(', ')}).`);
  out.push('');
  out.push('| round | run | processes | rate | count | s | p99 ms | non-2xx + errors | CPU % of the machine: api / workers / load gen / Redis / store | machine busy % |');
  out.push('|---|---|---|---|---|---|---|---|---|---|');
  for (const r of s.runs) {
    const c = r.cpuPct;
    const rate = r.kind === 'accept' ? `${fmt(r.rate)} req/s` : r.drained === false ? '**not drained**' : `${fmt(r.rate)} writes/s`;
    out.push(`| ${r.round} | ${r.kind} | ${r.processes} | ${rate} | ${fmt(r.count)} | ${fmt(r.seconds, 1)} | ${fmt(r.p99Ms, 1)} | ${fmt(r.non2xx)} | ${fmt(c['api'])} / ${fmt(c['workers'])} / ${fmt(c['loadgen'])} / ${fmt(c['redis'])} / ${fmt(c['store'])} | ${fmt(r.machineBusyPct)} |`);
  }
  return out;
}
