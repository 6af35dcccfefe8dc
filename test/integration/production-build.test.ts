import { expect } from 'chai';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { MongoClient } from 'mongodb';
import { CONFIG_VARIABLES } from '../../shared/config.js';
import { mongoClientOptions } from '../../shared/mongo.js';
import { applyDockerignore, emulateDockerBuild, type EmulatedStage } from '../helpers/dockerfile.js';
import { sharedServices } from '../helpers/root-hooks.js';
import { freePort, type ManagedServer } from '../../devkit/servers.js';
import { eventually, records, recordBody } from '../helpers/stack.js';
import { makeTestCertificates, startTlsRedis, type TestCertificates } from '../helpers/tls-redis.js';

/** `name: command` lines of a Procfile. */
function parseProcfile(text: string): Map<string, string> {
  const lines = new Map<string, string>();
  for (const line of text.split('\n')) {
    const m = /^([A-Za-z0-9_-]+):\s*(.+?)\s*$/.exec(line);
    if (m !== null) lines.set(m[1]!, m[2]!);
  }
  return lines;
}

const REPO = fileURLToPath(new URL('../..', import.meta.url));

/**
 * Who runs the processes: the image says USER node, and its files belong to root, so the app must
 * not need to write where it lives. As root we run them as nobody, in directories owned by root;
 * as anyone else, as ourselves (then that is not checked).
 */
function unprivileged(): { uid?: number; gid?: number } {
  return process.getuid?.() === 0 ? { uid: 65534, gid: 65534 } : {};
}

/** PATH without any node_modules/.bin (npm test puts the checkout's own there: dev tools a dyno has not). */
function cleanPath(): string {
  return (process.env['PATH'] ?? '/usr/local/bin:/usr/bin:/bin').split(delimiter).filter((p) => !p.includes('node_modules')).join(delimiter);
}

/**
 * The environment of the build's RUN lines: this machine's (proxy, CA bundle, HOME and so the
 * npm cache, shared with every other install here), less what belongs to the test run: npm's
 * lifecycle variables, NODE_OPTIONS (tsx), NODE_ENV and the service's own settings.
 */
function buildEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  const dropped = new Set(['NODE_OPTIONS', 'NODE_ENV', 'INIT_CWD', ...CONFIG_VARIABLES]);
  for (const [key, value] of Object.entries(process.env)) {
    if (value === undefined || dropped.has(key)) continue;
    if (/^npm_/i.test(key) && key.toLowerCase() !== 'npm_config_cache') continue;
    env[key] = value;
  }
  env['PATH'] = cleanPath();
  return env;
}

interface RunningProcess {
  readonly name: string;
  readonly child: ChildProcess;
  output(): string;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Process groups still alive, killed if the run exits without the after hook (a crash, a ^C). */
const liveGroups = new Set<number>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const pid of liveGroups) killGroup(pid, 'SIGKILL');
  });
}

function killGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // already gone
  }
}

/**
 * Starts a Procfile line as Heroku does: `bash -c` in the app's directory (bash execs a lone
 * command, so the signals and the exit status are node's), in a process group of its own (a
 * dyno's SIGTERM reaches every process of it; so does ours).
 */
function startProcess(name: string, command: string, cwd: string, env: Record<string, string>): RunningProcess {
  installExitHook();
  const child = spawn('bash', ['-c', command], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true, ...unprivileged() });
  liveGroups.add(child.pid!);
  let output = '';
  child.stdout!.setEncoding('utf8').on('data', (s: string) => (output += s));
  child.stderr!.setEncoding('utf8').on('data', (s: string) => (output += s));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => {
      liveGroups.delete(child.pid!);
      resolve({ code, signal });
    }),
  );
  return { name, child, output: () => output, exited };
}

/** SIGTERM to its group and the exit, or undefined when it outlived `timeoutMs` (then it is SIGKILLed). */
async function stopProcess(proc: RunningProcess, timeoutMs: number): Promise<{ code: number | null; signal: NodeJS.Signals | null } | undefined> {
  if (proc.child.exitCode !== null || proc.child.signalCode !== null) return proc.exited;
  killGroup(proc.child.pid!, 'SIGTERM');
  const exit = await Promise.race([proc.exited, new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), timeoutMs).unref())]);
  if (exit === undefined) {
    killGroup(proc.child.pid!, 'SIGKILL');
    await proc.exited;
  }
  return exit;
}

/**
 * The production build as Docker and a Heroku-style buildpack make it, from the committed files
 * only, and the Procfile's processes on it against a Redis that speaks TLS only.
 *
 * The steps are the Dockerfile's own, not a copy: test/helpers/dockerfile.ts reads it and runs
 * each stage in a directory of its own (COPY from a fresh checkout of HEAD, RUN through sh). So the
 * build stage sees only the files the Dockerfile COPYs, and the processes run in the final stage,
 * where only what it copies from the build (pruned node_modules, dist, package.json) exists. The
 * buildpack runs the same three steps (npm ci, npm run build, npm prune --omit=dev) in a full
 * checkout, a superset of these files; the first case fails if the Dockerfile stops doing them.
 * Why not one script that both the Dockerfile and this test run: the COPY lines matter as much as
 * the RUNs (a file the build needs and the Dockerfile forgets), and the Dockerfile keeps two RUN
 * layers, `npm ci` on the manifest and lock alone, cached until they change, then the build.
 *
 * Slow: the build (npm ci from the shared npm cache, tsc, prune) is most of it, the cases ~12 s;
 * the file took 73–88 s on a 2-core machine busy with other runs (load 5–7).
 */
describe('production build (Dockerfile stages from a fresh checkout, Procfile processes, TLS-only Redis)', function () {
  this.timeout(60_000);

  let root: string;
  let stages: EmulatedStage[] = [];
  let image: EmulatedStage;
  let procfile = new Map<string, string>();
  let certs: TestCertificates;
  let mongo: MongoClient;
  let redis: ManagedServer | undefined;
  let processes: RunningProcess[] = [];
  let database: string | undefined;

  before(async function () {
    this.timeout(300_000);
    root = mkdtempSync(join(tmpdir(), 'fi-prodbuild-'));
    // Traversable by the unprivileged user that runs the processes (mkdtemp makes it 0700).
    chmodSync(root, 0o711);
    // The committed tree of HEAD, as a platform's build gets it: no node_modules, dist or untracked files.
    const context = join(root, 'checkout');
    const head = execFileSync('git', ['-C', REPO, 'rev-parse', 'HEAD'], { encoding: 'utf8' }).trim();
    execFileSync('git', ['clone', '--quiet', '--no-checkout', REPO, context], { stdio: 'pipe', timeout: 60_000 });
    execFileSync('git', ['-C', context, 'checkout', '--quiet', '--detach', head], { stdio: 'pipe', timeout: 60_000 });
    expect(applyDockerignore(context), '.dockerignore keeps .git out of the context').to.include('.git');
    procfile = parseProcfile(readFileSync(join(context, 'Procfile'), 'utf8'));
    const stagesRoot = join(root, 'stages');
    mkdirSync(stagesRoot);
    stages = await emulateDockerBuild(readFileSync(join(context, 'Dockerfile'), 'utf8'), { context, root: stagesRoot, env: buildEnv(), runTimeoutMs: 240_000 });
    image = stages.at(-1)!;
    const certDir = join(root, 'tls');
    mkdirSync(certDir);
    certs = makeTestCertificates(certDir);
    mongo = new MongoClient(sharedServices().mongoUrl, { ...mongoClientOptions(), serverSelectionTimeoutMS: 10_000 });
  });

  after(async function () {
    this.timeout(60_000);
    for (const proc of processes) await stopProcess(proc, 5_000);
    await redis?.destroy();
    await mongo?.close();
    if (root !== undefined) rmSync(root, { recursive: true, force: true });
  });

  afterEach(async function () {
    this.timeout(60_000);
    for (const proc of processes) await stopProcess(proc, 15_000);
    processes = [];
    await redis?.destroy();
    redis = undefined;
    if (database !== undefined) await mongo.db(database).dropDatabase().catch(() => undefined);
    database = undefined;
  });

  it('the Dockerfile runs the buildpack steps, its image holds no dev dependency, and its CMD is the Procfile web line', () => {
    const build = stages.flatMap((s) => s.runs).join(' && ');
    const steps = ['npm ci', 'npm run build', 'npm prune --omit=dev'].map((step) => build.indexOf(step));
    expect(steps.every((at) => at >= 0) && steps.every((at, i) => i === 0 || at > steps[i - 1]!), `RUN lines ${JSON.stringify(build)}`).to.equal(true);
    expect(image.image, 'the runtime image is the Node this test runs on').to.match(new RegExp(`^node:${process.versions.node.split('.')[0]}\\b`));
    expect(image.env).to.include({ NODE_ENV: 'production' });
    expect(image.cmd?.join(' ')).to.equal(procfile.get('web'));
    expect(procfile.get('web'), 'the Procfile has web and worker').to.be.a('string');
    expect(procfile.get('worker'), 'the Procfile has web and worker').to.be.a('string');
    // Only what nothing at run time needs: npm keeps `devOptional` packages (typescript, an optional
    // peer of a runtime dependency) on --omit=dev.
    const checkout = join(root, 'checkout');
    const manifest = JSON.parse(readFileSync(join(checkout, 'package.json'), 'utf8')) as { devDependencies: Record<string, string> };
    const lock = JSON.parse(readFileSync(join(checkout, 'package-lock.json'), 'utf8')) as { packages: Record<string, { dev?: boolean }> };
    const devOnly = Object.keys(manifest.devDependencies).filter((name) => lock.packages[`node_modules/${name}`]?.dev === true);
    expect(devOnly, 'dev-only dependencies').to.include.members(['mocha', 'tsx']);
    expect(devOnly.filter((name) => existsSync(join(image.dir, 'node_modules', name))), 'dev-only dependencies in the runtime image').to.deep.equal([]);
    expect(existsSync(join(image.dir, 'dist', 'api', 'main.js')) && existsSync(join(image.dir, 'dist', 'worker', 'main.js'))).to.equal(true);
  });

  /** web and worker from the Procfile in the runtime image, with only the platform's variables. */
  async function startPlatform(extra: Record<string, string>, which: readonly string[] = ['web', 'worker']) {
    redis = await startTlsRedis(certs);
    database = `prodbuild_${randomBytes(4).toString('hex')}`;
    const port = await freePort();
    const key = { name: 'prod', secret: randomBytes(16).toString('hex') };
    const env: Record<string, string> = {
      PATH: cleanPath(),
      HOME: join(root, 'home'),
      ...image.env,
      PORT: String(port),
      MONGODB_URI: `${sharedServices().mongoUrl}/${database}`,
      API_KEYS: `${key.name}:${key.secret}`,
      ID_SIGNING_SECRETS: randomBytes(32).toString('hex'),
      REDIS_TLS_URL: redis.url,
      ...extra,
    };
    for (const name of which) processes.push(startProcess(name, procfile.get(name)!, image.dir, env));
    const api = `http://127.0.0.1:${port}`;
    await eventually(
      async () => {
        const dead = processes.find((p) => p.child.exitCode !== null || p.child.signalCode !== null);
        if (dead !== undefined) throw new Error(`${dead.name} exited (${dead.child.exitCode ?? dead.child.signalCode}):\n${dead.output()}`);
        const res = await fetch(`${api}/healthz`, { signal: AbortSignal.timeout(2_000) }).catch(() => undefined);
        return res?.status === 200 ? true : undefined;
      },
      30_000,
      'the web process to answer /healthz',
    );
    const post = (timeoutMs: number) =>
      fetch(`${api}/feedback-record`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${key.secret}`, 'Content-Type': 'application/json' },
        body: JSON.stringify(recordBody()),
        signal: AbortSignal.timeout(timeoutMs),
      });
    return { api, post, logs: () => processes.map((p) => `--- ${p.name}\n${p.output()}`).join('\n') };
  }

  for (const { title, env } of [
    { title: 'REDIS_TLS_REJECT_UNAUTHORIZED=false', env: (_: TestCertificates): Record<string, string> => ({ REDIS_TLS_REJECT_UNAUTHORIZED: 'false' }) },
    // No setting names a CA: Node's own NODE_EXTRA_CA_CERTS adds it to the default trust store.
    { title: 'verification on, the CA trusted through NODE_EXTRA_CA_CERTS', env: (c: TestCertificates): Record<string, string> => ({ NODE_EXTRA_CA_CERTS: c.caCert }) },
  ]) {
    it(`${title}: POST /feedback-record is answered 200, the worker stores it, and both processes stop cleanly on SIGTERM`, async () => {
      const platform = await startPlatform(env(certs));
      const ready = await fetch(`${platform.api}/readyz`, { signal: AbortSignal.timeout(10_000) });
      expect(ready.status, platform.logs()).to.equal(200);
      const res = await platform.post(10_000);
      const body = (await res.json()) as { feedback_record_id?: string };
      expect(res.status, `${JSON.stringify(body)}\n${platform.logs()}`).to.equal(200);
      const id = body.feedback_record_id!;
      const stored = await eventually(
        () => records(mongo.db(database)).findOne({ _id: id }).then((doc) => doc ?? undefined),
        20_000,
        `record ${id} in the store`,
      ).catch((err: Error) => {
        throw new Error(`${err.message}\n${platform.logs()}`);
      });
      expect(stored).to.include({ feedback_dataset_id: recordBody().record.feedback_dataset_id });
      expect(platform.logs()).to.not.include('redis connection error');
      if (unprivileged().uid !== undefined) {
        // bash execs the lone command: the pid is node's, and it runs as the unprivileged user.
        for (const proc of processes) expect(readFileSync(`/proc/${proc.child.pid}/status`, 'utf8'), `${proc.name} runs as nobody`).to.match(/^Uid:\t65534\t/m);
      }
      for (const proc of processes) {
        const exit = await stopProcess(proc, 15_000);
        expect(exit, `${proc.name} outlived SIGTERM by 15 s:\n${proc.output()}`).to.deep.equal({ code: 0, signal: null });
      }
    });
  }

  it('verification on without the CA: the web process logs the certificate error, is not ready and acknowledges nothing', async () => {
    const platform = await startPlatform({}, ['web']);
    // Redis is up before the process starts, so its first connection error is the refused certificate.
    const logged = await eventually(
      async () => platform.logs().split('\n').find((line) => line.includes('redis connection error')),
      15_000,
      'the web process to log the Redis connection error',
    );
    expect(logged).to.match(/"err":"[^"]*certificate/);
    // Both answer 503 within ENQUEUE_TIMEOUT_MS (the enqueuer and the backlog bound their wait
    // for a connection that never becomes ready): nothing is promised, nothing hangs.
    const ready = await fetch(`${platform.api}/readyz`, { signal: AbortSignal.timeout(10_000) });
    expect(ready.status, 'GET /readyz').to.equal(503);
    const write = await platform.post(10_000);
    expect(write.status, 'POST /feedback-record').to.equal(503);
    expect(platform.logs(), 'the web process is still running').to.not.match(/"msg":"(shutting down|unhandled rejection)"/);
    expect(processes[0]!.child.exitCode).to.equal(null);
  });
});
