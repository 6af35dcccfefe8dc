// The command line of `npm run bench` (`--help` prints it).
import { join } from 'node:path';
import { DESIGNS, type Design } from './types.js';
import { ROOT } from './root.js';

export interface Options {
  rounds: number;
  durationS: number;
  connections: number;
  responseShare: number;
  warmupS: number;
  rawS: number;
  burst: number;
  burstConnections: number;
  burstScale: number;
  drainS: number;
  burstDrainS: number;
  /** Seconds of the sustained scenario (0 skips it). */
  sustainedS: number;
  /** What its rate is half of: the API's max accept rate, or the worker's drain rate alone (both from this run's rounds). */
  sustainedOf: 'accept' | 'store';
  /** Seconds of each accept run of the scale scenario (0 skips it). */
  scaleS: number;
  env: Record<string, string>;
  cpuProf: boolean;
  logs: boolean;
  logLevel: string;
  outDir: string;
  maxMinutes: number;
  quick: boolean;
  designs: Design[];
  loadgen: 'wrk' | 'autocannon';
  /** Environment of the (d') design: a second project API process, for A/B runs of a setting. */
  ab: Record<string, string>;
  /** A compiled build (a `dist` directory) that (d') runs instead of `dist/`: A/B runs of a code change. */
  abDist: string | undefined;
  /** A run whose server waited for a CPU longer than this share of its wall time, %, is starved. */
  starvedWaitPct: number;
  starvedForeignPct: number;
  /** Most rounds in all: rounds with a starved design are repeated until `rounds` are clean or this many ran. */
  maxRounds: number;
}

const HELP = `usage: npm run bench -- [options]

  --quick                 smoke run: 1 round of 3 s, 1 s warm-up, bursts of 5,000 and 2,500,
                          10 s of sustained load
  --rounds N              clean rounds of every design wanted (default 3); a round in which a
                          design was starved (below) is reported, left out of the medians, and
                          another round runs, up to --max-rounds in all
  --max-rounds N          most rounds in all (default 2 × --rounds)
  --starved-wait-pct P    a design is starved in a round when its server's main thread waited
                          for a CPU (runnable, not running: /proc/<pid>/schedstat) for more than P%
                          of the run's wall time (default 20). Designs whose worker drains on
                          the same cores (project_live, project_webhook) wait for the worker by
                          design: they are starved when processes outside the bench used more
                          than --starved-foreign-pct P% of the machine instead (default 10)
  --duration S            seconds of load per design and round (default 10)
  --connections N         concurrent connections (default 100)
  --response-share F      share of /feedback-response requests, 0-1 in steps of 0.1 (default 0.1)
  --warmup S              warm-up per design before the rounds, not recorded (default 2)
  --raw S                 seconds of raw insertMany per round (default 3)
  --burst N               records in the burst (default 100000; 0 skips the bursts)
  --burst-connections N   connections of the burst (default 400)
  --burst-scale F         size of the second burst relative to the first (default 0.5; 0 skips it)
  --drain S               longest wait for the worker to store a round's backlog (default 15); what
                          is not stored by then is thrown away (worker restarted, queue emptied)
  --burst-drain S         the same after each burst, from its last answer (default 120)
  --sustained S           seconds of load at half the project's max accept rate (the median of its
                          accept rounds in this run) with the worker live, sampling the backlog
                          every second (default 60; 0 skips it)
  --sustained-of store    offer half the rate at which the worker alone drained this run's rounds
                          instead (what the store takes: shows the lag when the store keeps up)
  --scale S               seconds of each accept run of the scale scenario (default 10, --quick 3;
                          0 skips it): WEB_CONCURRENCY=2 against 1, then the writes each queued
                          drained by 2 worker processes against 1, alternating, --rounds rounds
  --designs a,b           subset of ${DESIGNS.join(',')}
  --loadgen G             wrk (default: C, one thread, leaves the server the cores) or autocannon
                          for the timed rounds; bursts and seeding always use autocannon
  --env KEY=VALUE         environment for the project's web and worker processes (repeatable),
                          e.g. --env BATCH_MAX_IN_FLIGHT=4 --env WORKER_CONCURRENCY=8
  --ab KEY=VALUE          runs design project_b: a second API process of the project (no worker, a
                          queue of its own) with these settings on top of --env (repeatable), in
                          the same rounds as project, e.g. --designs project,project_b
                          --ab BATCH_MAX_IN_FLIGHT=4
  --ab-dist DIR           design project_b runs DIR/api/main.js (another build of the project,
                          e.g. a copy of dist/ made before a change) instead of dist/api/main.js:
                          the A/B of a code change, same rounds, same settings
  --log-level L           LOG_LEVEL of every server (default info; logs go to /dev/null)
  --logs                  keep the servers' stdout in bench/results/tmp/ instead of /dev/null
  --cpu-prof              run the Node servers with --cpu-prof (profiles in bench/results/tmp/)
  --out DIR               where results go (default bench/results)
  --max-minutes M         stop everything after M minutes whatever happens (default 20)
`;

type NumberKey = { [K in keyof Options]: Options[K] extends number ? K : never }[keyof Options];

/** The numeric options: the field each sets and its range; `whole` rounds it. */
const NUMBER_FLAGS: Readonly<Record<string, { key: NumberKey; min: number; max: number; whole?: true }>> = {
  '--rounds': { key: 'rounds', min: 1, max: 50, whole: true },
  '--duration': { key: 'durationS', min: 1, max: 600 },
  '--connections': { key: 'connections', min: 1, max: 5000, whole: true },
  '--response-share': { key: 'responseShare', min: 0, max: 1 },
  '--warmup': { key: 'warmupS', min: 0, max: 120 },
  '--raw': { key: 'rawS', min: 0.5, max: 120 },
  '--burst': { key: 'burst', min: 0, max: 10_000_000, whole: true },
  '--burst-connections': { key: 'burstConnections', min: 1, max: 5000, whole: true },
  '--burst-scale': { key: 'burstScale', min: 0, max: 20 },
  '--drain': { key: 'drainS', min: 1, max: 3600 },
  '--burst-drain': { key: 'burstDrainS', min: 1, max: 3600 },
  '--sustained': { key: 'sustainedS', min: 0, max: 3600 },
  '--scale': { key: 'scaleS', min: 0, max: 600 },
  '--max-minutes': { key: 'maxMinutes', min: 1, max: 600 },
  '--max-rounds': { key: 'maxRounds', min: 1, max: 100, whole: true },
  '--starved-wait-pct': { key: 'starvedWaitPct', min: 0, max: 100 },
  '--starved-foreign-pct': { key: 'starvedForeignPct', min: 0, max: 100 },
};

function numberOf(flag: string, value: string | undefined, range: { min: number; max: number }): number {
  const n = Number(value);
  if (value === undefined || !Number.isFinite(n) || n < range.min || n > range.max) throw new Error(`${flag} needs a number from ${range.min} to ${range.max}`);
  return n;
}

function keyValue(flag: string, text = ''): Record<string, string> {
  const eq = text.indexOf('=');
  if (eq <= 0) throw new Error(`${flag} needs KEY=VALUE`);
  return { [text.slice(0, eq)]: text.slice(eq + 1) };
}

export function parseArgs(argv: readonly string[]): Options {
  const quick = argv.includes('--quick');
  const o: Options = {
    rounds: quick ? 1 : 3,
    durationS: quick ? 3 : 10,
    connections: 100,
    responseShare: 0.1,
    warmupS: quick ? 1 : 2,
    rawS: quick ? 1 : 3,
    burst: quick ? 5_000 : 100_000,
    burstConnections: 400,
    burstScale: 0.5,
    drainS: quick ? 10 : 15,
    burstDrainS: quick ? 15 : 120,
    sustainedS: quick ? 10 : 60,
    sustainedOf: 'accept',
    scaleS: quick ? 3 : 10,
    env: {},
    cpuProf: false,
    logs: false,
    logLevel: 'info',
    outDir: join(ROOT, 'bench', 'results'),
    maxMinutes: 20,
    quick,
    // project_b runs only with --ab (or when named in --designs).
    designs: DESIGNS.filter((d) => d !== 'project_b'),
    loadgen: 'wrk',
    ab: {},
    abDist: undefined,
    starvedWaitPct: 20,
    starvedForeignPct: 10,
    maxRounds: 0,
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const next = () => argv[++i];
    const numeric = NUMBER_FLAGS[a];
    if (numeric !== undefined) {
      const n = numberOf(a, next(), numeric);
      o[numeric.key] = numeric.whole ? Math.round(n) : n;
      continue;
    }
    switch (a) {
      case '--quick':
        break;
      case '--designs': {
        const list = (next() ?? '').split(',').map((s) => s.trim());
        const bad = list.filter((d) => !(DESIGNS as readonly string[]).includes(d));
        if (bad.length > 0) throw new Error(`--designs: unknown ${bad.join(', ')}`);
        o.designs = DESIGNS.filter((d) => list.includes(d));
        break;
      }
      case '--env':
        Object.assign(o.env, keyValue(a, next()));
        break;
      case '--loadgen': {
        const g = next();
        if (g !== 'wrk' && g !== 'autocannon') throw new Error('--loadgen must be wrk or autocannon');
        o.loadgen = g;
        break;
      }
      case '--sustained-of': {
        const of = next();
        if (of !== 'accept' && of !== 'store') throw new Error('--sustained-of must be accept or store');
        o.sustainedOf = of;
        break;
      }
      case '--ab': {
        Object.assign(o.ab, keyValue(a, next()));
        if (!o.designs.includes('project_b')) o.designs = DESIGNS.filter((d) => d === 'project_b' || o.designs.includes(d));
        break;
      }
      case '--ab-dist': {
        o.abDist = next();
        if (o.abDist === undefined) throw new Error('--ab-dist needs a directory');
        if (!o.designs.includes('project_b')) o.designs = DESIGNS.filter((d) => d === 'project_b' || o.designs.includes(d));
        break;
      }
      case '--log-level':
        o.logLevel = next() ?? 'info';
        break;
      case '--logs':
        o.logs = true;
        break;
      case '--cpu-prof':
        o.cpuProf = true;
        break;
      case '--out':
        o.outDir = next() ?? o.outDir;
        break;
      case '-h':
      case '--help':
        process.stdout.write(HELP);
        process.exit(0);
        break;
      default:
        throw new Error(`unknown option ${a} (see --help)`);
    }
  }
  o.maxRounds = o.maxRounds === 0 ? o.rounds * 2 : Math.max(o.rounds, o.maxRounds);
  return o;
}

