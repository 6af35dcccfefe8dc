// `npm run bench`: this project against its own ceiling and the designs a user would otherwise
// pick, on one machine, in one run. docs/performance.md says what is measured and how to read it.
// The scenarios are in bench/scenarios/, what they share in bench/lib/runner.ts.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join, relative } from 'node:path';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import ts from 'typescript';
import { loadConfig } from '../shared/config.js';
import { runLoad } from './lib/load.js';
import { parseArgs } from './lib/options.js';
import { hasWrk, runWrk } from './lib/wrk.js';
import { killAllSync, spawnProc, stopAll, type Proc } from './lib/procs.js';
import { basisLabel, fmt, median, renderMarkdown, renderSvg, roundRatios, starvedIn, summarize } from './lib/report.js';
import { freePort, startFerretDbServer, startRedisServer, waitForPort } from './lib/services.js';
import { LIVE_DESIGNS, type BenchResult, type BurstResult, type Round, type ScaleResult, type SustainedResult } from './lib/types.js';
import { checkFatal, connectStore, drainWithin, mixFor, progress, ROOT, SEED_RECORDS, serverOf, setFatal, sleep, STARTED, until, type Ctx } from './lib/runner.js';
import { webhookReceiver } from './lib/webhook-receiver.js';
import { ACCEPT_SCENARIOS } from './scenarios/accept.js';
import { runBurst } from './scenarios/burst.js';
import { resetProject, seed } from './scenarios/seed.js';
import { runScale } from './scenarios/scale.js';
import { runSustained } from './scenarios/sustained.js';

/**
 * A TypeScript server of bench/ (baselines/, peers/) with its types stripped, in .cache/bench/:
 * the comparison servers run as plain JavaScript like the project's compiled dist/
 * (type-checking is `npm run typecheck`'s job).
 */
function transpileServer(rel: string): string {
  const source = readFileSync(join(ROOT, 'bench', rel), 'utf8');
  const out = ts.transpileModule(source, {
    fileName: rel,
    compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022, verbatimModuleSyntax: true },
  });
  const dir = join(ROOT, '.cache', 'bench');
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${rel.replace(/[/.]/g, '-')}.mjs`);
  writeFileSync(file, out.outputText);
  return file;
}

async function main(): Promise<void> {
  const opts = parseArgs(process.argv.slice(2));
  const command = `npm run bench${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}`;
  const watchdog = setTimeout(() => {
    progress(`time limit of ${opts.maxMinutes} min reached: stopping everything`);
    void stopAll(2_000).finally(() => process.exit(2));
  }, opts.maxMinutes * 60_000);
  watchdog.unref();

  for (const f of ['dist/api/main.js', 'dist/worker/main.js', 'dist/api/app.js']) {
    if (!existsSync(join(ROOT, f))) throw new Error(`${f} is missing: run "npm run build" first (scripts/bench.sh does)`);
  }
  if (opts.loadgen === 'wrk' && !(await hasWrk())) throw new Error('wrk is missing: apt-get install wrk (scripts/bench.sh installs it), or pass --loadgen autocannon');
  const tmpDir = join(opts.outDir, 'tmp');
  mkdirSync(tmpDir, { recursive: true });
  const stamp = STARTED.toISOString().replace(/:/g, '-').replace(/\.\d+Z$/, 'Z');
  const profDir = join(tmpDir, `prof-${stamp}`);

  progress(`starting Redis (AOF everysec, noeviction) and FerretDB; ${opts.rounds} round(s) × ${opts.durationS} s, ${opts.connections} connections, designs ${opts.designs.join(', ')}`);
  const want = new Set(opts.designs);
  const [redis, ferret, ferretDirect] = await Promise.all([startRedisServer(ROOT), startFerretDbServer(ROOT), want.has('direct') ? startFerretDbServer(ROOT) : undefined]);
  const apiKey = `bench-${randomBytes(12).toString('hex')}`;
  const ports = { web: await freePort(), web_b: await freePort(), worker: await freePort(), raw_http: await freePort(), ceiling: await freePort(), textbook: await freePort(), direct: await freePort() };
  const plumbing = {
    PATH: process.env['PATH'] ?? '',
    NODE_ENV: 'production',
    HOST: '127.0.0.1',
    REDIS_URL: redis.url,
    API_KEYS: `bench:${apiKey}`,
    ID_SIGNING_SECRETS: `bench-id-secret-${randomBytes(12).toString('hex')}`,
    LOG_LEVEL: opts.logLevel,
  };
  const died = (p: Proc, code: number | null, signal: NodeJS.Signals | null) => {
    setFatal(new Error(`${p.name} exited unexpectedly (code ${code ?? '-'}, signal ${signal ?? '-'}):\n${p.stderrTail()}`));
  };
  const nodeArgs = (name: string) => (opts.cpuProf ? ['--cpu-prof', `--cpu-prof-dir=${join(profDir, name)}`] : []);
  const stdoutFile = (name: string) => (opts.logs ? { stdoutFile: join(tmpDir, `${stamp}-${name}.log`) } : {});
  const spawnNode = (name: string, args: string[], env: Record<string, string>) =>
    spawnProc(name, process.execPath, [...nodeArgs(name), ...args], { cwd: ROOT, env, onUnexpectedExit: died, ...stdoutFile(name) });

  const baselineJs = transpileServer('baselines/server.ts');
  // Design project_webhook registers an endpoint (a receiver in this process) through the admin API.
  const adminKey = `bench-admin-${randomBytes(12).toString('hex')}`;
  const webhookEnv = want.has('project_webhook') ? { API_KEYS: `bench:${apiKey},bench-admin:${adminKey}`, ADMIN_API_KEY_NAMES: 'bench-admin', WEBHOOKS_ALLOW_INSECURE: 'true', WEBHOOK_REFRESH_MS: '500' } : {};
  const projectEnv = { ...opts.env, ...plumbing, ...webhookEnv, QUEUE_NAME: 'bench-project' };
  const needProject = want.has('project') || [...LIVE_DESIGNS].some((d) => want.has(d)) || opts.burst > 0 || opts.sustainedS > 0;
  const spawnWorker = (mongoUrl: string) => spawnNode('worker', ['dist/worker/main.js'], { ...projectEnv, MONGODB_URI: `${mongoUrl}/bench_project`, PORT: '0', WORKER_METRICS_PORT: String(ports.worker) });
  const procs: Ctx['procs'] = {
    web: needProject ? spawnNode('web', ['dist/api/main.js'], { ...projectEnv, MONGODB_URI: `${ferret.url}/bench_project`, PORT: String(ports.web) }) : undefined,
    worker: needProject ? spawnWorker(ferret.url) : undefined,
    web_b: want.has('project_b') ? spawnNode('web_b', [opts.abDist === undefined ? 'dist/api/main.js' : join(opts.abDist, 'api', 'main.js')], { ...projectEnv, ...opts.ab, QUEUE_NAME: 'bench-project-b', MONGODB_URI: `${ferret.url}/bench_project_b`, PORT: String(ports.web_b) }) : undefined,
    ceiling: want.has('ceiling') ? spawnNode('ceiling', [baselineJs], { ...opts.env, ...plumbing, BENCH_DESIGN: 'ceiling', PORT: String(ports.ceiling), MONGODB_URI: `${ferret.url}/bench_unused` }) : undefined,
    raw_http: want.has('raw_http') ? spawnNode('raw_http', [transpileServer('peers/raw-http.ts')], { ...plumbing, PORT: String(ports.raw_http) }) : undefined,
    textbook: want.has('textbook') ? spawnNode('textbook', [transpileServer('peers/textbook.ts')], { ...plumbing, PORT: String(ports.textbook), QUEUE_NAME: 'bench-textbook' }) : undefined,
    direct: want.has('direct') ? spawnNode('direct', [baselineJs], { ...opts.env, ...plumbing, BENCH_DESIGN: 'direct', PORT: String(ports.direct), MONGODB_URI: `${(ferretDirect ?? ferret).url}/bench_direct` }) : undefined,
  };
  for (const [name, p] of Object.entries(procs)) {
    if (p === undefined) continue;
    const port = ports[name as keyof typeof ports];
    await waitForPort(port, 60_000).catch((err: unknown) => {
      throw new Error(`${name} did not listen on ${port}: ${(err as Error).message}\n${p.stderrTail()}`);
    });
  }
  checkFatal();

  const redisClient = new Redis(redis.url, { maxRetriesPerRequest: 3 });
  const queueConnection = { host: '127.0.0.1', port: redis.port };
  const projectQueue = new Queue('bench-project', { connection: queueConnection });
  const textbookQueue = new Queue('bench-textbook', { connection: queueConnection });
  const projectQueueB = new Queue('bench-project-b', { connection: queueConnection });
  const { mongo, projectDb, rawDb } = await connectStore({ ferret });
  const workerConcurrency = Number(opts.env['WORKER_CONCURRENCY'] ?? loadConfig({}).workerConcurrency);
  const ctx: Ctx = {
    opts,
    redis,
    ferret,
    ferretDirect,
    procs,
    spawnWorker,
    spawnProject: (name, entry, env) => spawnNode(name, [entry], { ...projectEnv, ...env }),
    ports,
    apiKey,
    adminKey,
    webhookReceiver: webhookReceiver(),
    redisClient,
    projectQueue,
    textbookQueue,
    projectQueueB,
    mongo,
    projectDb,
    rawDb,
    workerConcurrency,
    seedIds: [],
    sampleWrite: undefined,
  };

  const rounds: Round[] = [];
  const bursts: BurstResult[] = [];
  let sustained: SustainedResult | undefined;
  let sustainedSkipped: string | undefined;
  let scale: ScaleResult | undefined;
  const machine: Record<string, string | number> = {
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model ?? 'unknown',
    node: process.versions.node,
    redis: `Redis ${/redis_version:(\S+)/.exec(await redisClient.info('server'))?.[1] ?? '?'}`,
    ferretdb: String(((await mongo.db('admin').command({ buildInfo: 1 })) as { ferretdb?: { version?: string } }).ferretdb?.version ?? '?'),
    loadavgAtStart: loadavg().map((x) => x.toFixed(2)).join(' '),
    store: process.env['BENCH_STORE'] === 'sqlite' ? 'SQLite' : 'PostgreSQL',
  };
  let mixInfo = { recordBodyBytes: 0, responseBodyBytes: 0, meanBodyBytes: 0, recordShare: 0, connections: opts.connections };

  const finish = (partial: boolean) => {
    const { medians, cleanRounds, ratios, targets } = summarize(rounds, bursts, sustained);
    const result: BenchResult = {
      startedAt: STARTED.toISOString(),
      finishedAt: new Date().toISOString(),
      wallSeconds: (Date.now() - STARTED.getTime()) / 1000,
      command,
      machine,
      options: { ...opts, outDir: relative(ROOT, opts.outDir), partial },
      projectEnv: opts.env,
      mix: mixInfo,
      rounds,
      bursts,
      ...(sustained === undefined ? {} : { sustained }),
      ...(sustainedSkipped === undefined ? {} : { sustainedSkipped }),
      ...(scale === undefined ? {} : { scale }),
      medians,
      cleanRounds,
      ratios,
      targets,
      notes: NOTES,
    };
    mkdirSync(opts.outDir, { recursive: true });
    const jsonPath = join(opts.outDir, `${stamp}.json`);
    writeFileSync(jsonPath, `${JSON.stringify(result, null, 2)}\n`);
    const md = renderMarkdown(result);
    writeFileSync(join(opts.outDir, `${stamp}.md`), md);
    if (!partial && !opts.quick) {
      writeFileSync(join(opts.outDir, 'latest.md'), md);
      writeFileSync(join(opts.outDir, 'latest.svg'), renderSvg(result));
    } else {
      writeFileSync(join(opts.outDir, `${stamp}.svg`), renderSvg(result));
    }
    return { md, jsonPath };
  };

  try {
    if (needProject) {
      await until('the API to be ready', 30_000, 200, async () => {
        const res = await fetch(`http://127.0.0.1:${ports.web}/readyz`).catch(() => undefined);
        return res?.status === 200 ? true : undefined;
      });
      await waitForPort(ports.worker, 60_000);
      progress(`seeding ${SEED_RECORDS} records through the API (targets of /feedback-response)`);
      await seed(ctx, SEED_RECORDS);
    }
    const probe = mixFor(ctx, 'bench_r1_project');
    mixInfo = { recordBodyBytes: probe.recordBodyBytes, responseBodyBytes: probe.responseBodyBytes, meanBodyBytes: probe.meanBodyBytes, recordShare: probe.recordShare, connections: opts.connections };

    if (opts.warmupS > 0) {
      progress(`warm-up: ${opts.warmupS} s per design (not recorded)`);
      for (const d of opts.designs) {
        checkFatal();
        const url = `http://127.0.0.1:${ports[serverOf[d]]}`;
        const mix = mixFor(ctx, 'bench_warmup');
        const run =
          opts.loadgen === 'wrk'
            ? runWrk({ url, connections: opts.connections, headers: mix.headers, requests: mix.fixed, durationS: opts.warmupS })
            : runLoad({ url, connections: opts.connections, requests: mix.requests, durationS: opts.warmupS, maxS: opts.warmupS + 30 });
        await run.done;
        if (d === 'textbook') await textbookQueue.obliterate({ force: true });
        if (d === 'project_b') await projectQueueB.obliterate({ force: true });
        if ((d === 'project' || LIVE_DESIGNS.has(d)) && !(await drainWithin(ctx, opts.drainS))) await resetProject(ctx);
      }
    }

    let clean = 0;
    for (let round = 1; clean < opts.rounds && round <= opts.maxRounds; round++) {
      const order = opts.designs.map((_, i) => opts.designs[(i + round - 1) % opts.designs.length]!);
      progress(`round ${round} (${clean} of ${opts.rounds} clean so far, at most ${opts.maxRounds}): ${order.join(' → ')}`);
      const r: Round = { round, order, runs: {}, ratios: {} };
      rounds.push(r);
      for (const d of order) {
        checkFatal();
        await sleep(500);
        await ACCEPT_SCENARIOS[d](ctx, round, r);
      }
      r.ratios = roundRatios(r);
      r.starved = starvedIn(r);
      if (r.starved.length === 0) clean++;
      else progress(`round ${round}: ${r.starved.join(', ')} starved (waited for a CPU more than ${opts.starvedWaitPct}% of the run, or, with the worker live, foreign jobs used more than ${opts.starvedForeignPct}% of the machine): left out of the medians`);
      const q = r.ratios;
      progress(
        `round ${round} ratios: CPU/write (d)/(b) ${fmt(q['cpu_vs_textbook'], 2)}  (d)/(r) ${fmt(q['cpu_vs_raw'], 2)}  Redis CPU/write (d)/(b) ${fmt(q['redis_cpu_vs_textbook'], 3)}  (d')/(d) ${fmt(q['ab_cpu_vs_project'], 2)}  accept/ceiling ${fmt(q['accept_vs_ceiling'], 2)}  accept/textbook ${fmt(q['accept_vs_textbook'], 2)}  p99/textbook ${fmt(q['p99_vs_textbook'], 2)}  ` +
          `store/accept ${fmt(q['store_vs_accept'], 2)}  store/raw ${fmt(q['store_vs_raw'], 2)}  redis/payload ${fmt(q['redis_vs_payload'], 2)}  live/ceiling ${fmt(q['live_accept_vs_ceiling'], 2)}`,
      );
    }

    if (opts.burst > 0 && needProject) {
      const sizes = [opts.burst, ...(opts.burstScale > 0 ? [Math.round(opts.burst * opts.burstScale)] : [])];
      for (const [i, size] of sizes.entries()) bursts.push(await runBurst(ctx, size, i));
    }

    if (opts.sustainedS > 0) {
      // Half of what the API alone accepted in this run's rounds (design project, worker paused),
      // or of the rate at which the worker alone drained what those rounds queued.
      const of = opts.sustainedOf;
      const basis = median(rounds.map((r) => (of === 'accept' ? r.runs.project?.rps : r.drain?.rate)));
      if (basis === undefined || !(basis > 0)) {
        sustainedSkipped = `no accept round of design project in this run to take ${basisLabel(of)} from (add project to --designs)`;
        progress(`sustained: skipped, ${sustainedSkipped}`);
      } else {
        sustained = await runSustained(ctx, opts.sustainedS, { of, rps: basis });
      }
    }

    if (opts.scaleS > 0) scale = await runScale(ctx, opts.scaleS, opts.rounds);

    const { md, jsonPath } = finish(false);
    process.stdout.write(`${md}\n`);
    progress(`wrote ${relative(ROOT, jsonPath)}, ${relative(ROOT, jsonPath.replace(/\.json$/, '.md'))}${opts.quick ? ' (quick run: latest.md/latest.svg left alone)' : ', latest.md, latest.svg'}`);
  } catch (err) {
    if (rounds.length > 0 || bursts.length > 0 || sustained !== undefined || scale !== undefined) {
      try {
        const { jsonPath } = finish(true);
        progress(`partial results in ${relative(ROOT, jsonPath)}`);
      } catch {
        // the error below matters more
      }
    }
    throw err;
  } finally {
    await Promise.allSettled([projectQueue.close(), textbookQueue.close(), projectQueueB.close(), ctx.mongo.close(), redisClient.quit()]);
    progress('stopping servers');
    await stopAll(opts.cpuProf ? 15_000 : 5_000);
    if (opts.cpuProf) progress(`CPU profiles in ${relative(ROOT, profDir)} (summarise one with: node --import tsx bench/profile.ts ${relative(ROOT, profDir)}/web/*.cpuprofile)`);
  }
}

const NOTES = [
  'Accepted req/s counts 2xx answers per second of load; latencies are the load generator\'s (all answers). The timed rounds are driven by wrk (C, one thread, a Lua script handing out 3,000 distinct bodies in turn), whose own CPU is the "load gen" column; bursts and seeding use autocannon (they need a fixed number of requests).',
  '(r) and (b) are peers outside the project\'s code (bench/peers/): what one Node process can parse and answer with node:http alone, and the API a team would write in an afternoon (Koa, @koa/router, koa-bodyparser, a shape check, one queue.add per request). (a) and (c) run the project\'s own createApp (auth, body parsing, valibot validation, id minting, request log) with another Enqueuer: answering without writing, and one MongoDB write per request (bench/baselines/server.ts).',
  '(d) "worker paused": the project\'s API alone (its BullMQ queue paused), as the peers have no worker competing for the same 2 cores; in production API and worker are separate dynos. "(d) + worker" runs the same load while the worker drains on the same cores.',
  'Server ELU: event-loop utilisation of the server process over the run (performance.eventLoopUtilization: the share of wall time the loop was running code rather than waiting). Below 1 with a saturated load generator means requests wait on something other than this core (here: Redis acknowledgements).',
  'Worker store rate: the writes queued by the paused run, drained by the worker alone (from resume until the queue is empty). Raw insertMany: the same documents (record + response per write, in batches of the mean job size, as many at a time as WORKER_CONCURRENCY) written by a bare client into collections with the same indexes, right after, in the same round.',
  'Redis bytes per queued write: growth of used_memory while the paused run\'s writes wait in the queue, divided by the writes the API answered 200 for; compared with the mean JSON body of the mix.',
  'End-to-end lag: the worker\'s feedback_worker_lag_seconds histogram over the "(d) + worker" run and its drain (interpolated inside buckets).',
  'CPU µs/req: user+system CPU of each process (from /proc) over the run, per accepted request; "foreign" is CPU used by processes outside the benchmark (other jobs on this machine), which makes absolute numbers drift: compare ratios within a round.',
  'Scale (--scale S): a second and third API of the project, WEB_CONCURRENCY=1 and =2, on their own ports and queue (records only, so the drain never waits on records of another database), loaded in turn by the same wrk for S s per run, their queue paused; then the writes each run queued are drained by 1 or 2 worker processes started for it (timed from resume to an empty queue). The order alternates per round and ratios are taken per round. CPU % is of the whole machine (100% = every core busy): the API column counts a primary and its processes, the store column FerretDB and its PostgreSQL backends.',
  'Sustained load: autocannon at a fixed overall rate (overallRate: each connection sends its share at the start of every second, then waits for the next) of half the median accepted req/s of the (d) worker-paused rounds of the same run, the usual mix, with the worker draining on the same cores. Backlog: unfinished BullMQ jobs (getJobCounts: wait, active, delayed, prioritized, waiting-children) sampled every second on the bench\'s own Redis connection. Offered req/s counts answers of any status and errors. Lag: feedback_worker_lag_seconds of the writes stored during the window (difference of two scrapes of the worker\'s histogram, so only as fine as its buckets).',
];

process.on('exit', () => killAllSync());
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.once(sig, () => {
    progress(`${sig}: stopping everything`);
    void stopAll(2_000).finally(() => process.exit(130));
  });
}
process.on('uncaughtException', (err) => {
  progress(`uncaught: ${err.stack ?? err.message}`);
  killAllSync();
  process.exit(1);
});

main().then(
  () => process.exit(0),
  (err: unknown) => {
    progress(`failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    void stopAll(2_000).finally(() => process.exit(1));
  },
);
