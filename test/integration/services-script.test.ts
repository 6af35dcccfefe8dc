import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { MongoClient } from 'mongodb';
import { alive, cleanUpScriptRun, descendants, distinctFreePorts, killOneAndExpectStop, portAnswers, postmaster, type Proc } from '../helpers/process-tree.js';
import { eventually } from '../helpers/stack.js';

/** Variables of the test run that would point the script at other servers. */
const INHERITED_OUT = ['REDIS_URL', 'REDIS_TLS_URL', 'MONGODB_URI'];

/**
 * `npm run services` as an outside check runs it: the Redis and store of `npm start` on the
 * LOCAL_* ports and run directory it is given, their URLs on stdout, then one signal to the npm
 * process alone. Slow: it starts Redis, PostgreSQL with DocumentDB and FerretDB.
 */
describe('npm run services (scripts/services.sh)', function () {
  this.timeout(240_000);

  let child: ChildProcess | undefined;
  let runDir: string | undefined;
  let seen: Proc[] = [];

  afterEach(() => {
    cleanUpScriptRun({ child, runDir, seen });
    child = undefined;
    runDir = undefined;
    seen = [];
  });

  /** `npm run --silent services` on free LOCAL_* ports and a run directory of its own, once it printed its two URLs. */
  async function startServices() {
    const ports = await distinctFreePorts(['LOCAL_REDIS_PORT', 'LOCAL_MONGODB_PORT', 'LOCAL_POSTGRES_PORT', 'LOCAL_FERRETDB_DEBUG_PORT'] as const);
    runDir = mkdtempSync(join(tmpdir(), 'fi-services-'));
    // As root the private PostgreSQL runs as an unprivileged user, which must traverse this directory.
    chmodSync(runDir, 0o711);
    const env: Record<string, string> = {};
    for (const [key, value] of Object.entries(process.env)) if (value !== undefined && !INHERITED_OUT.includes(key)) env[key] = value;
    Object.assign(env, Object.fromEntries(Object.entries(ports).map(([k, v]) => [k, String(v)])), { LOCAL_RUN_DIR: runDir });

    const npm = spawn('npm', ['run', '--silent', 'services'], { env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    child = npm;
    let stdout = '';
    let stderr = '';
    npm.stdout!.setEncoding('utf8').on('data', (s: string) => (stdout += s));
    npm.stderr!.setEncoding('utf8').on('data', (s: string) => (stderr += s));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => npm.once('exit', (code, sig) => resolve({ code, signal: sig })));

    const urls = await eventually(
      async () => {
        if (npm.exitCode !== null) throw new Error(`npm run services exited (${npm.exitCode}) before printing its URLs:\n${stdout}\n${stderr}`);
        const lines = stdout.split('\n').filter((l) => l !== '');
        return lines.length >= 2 ? lines : undefined;
      },
      180_000,
      'REDIS_URL and MONGODB_URI on stdout',
    );
    // Exactly those two lines on stdout: a caller can `eval` or parse them.
    expect(urls).to.deep.equal([`REDIS_URL=redis://127.0.0.1:${ports.LOCAL_REDIS_PORT}`, `MONGODB_URI=mongodb://127.0.0.1:${ports.LOCAL_MONGODB_PORT}/feedback`]);
    return { npm, ports, exited, stderr: () => stderr, runDir };
  }

  it('a server that dies on its own (its Redis killed) ends the run with a message and a failing status, the other servers stopped', async () => {
    const run = await startServices();
    seen = await killOneAndExpectStop({ ...run, output: run.stderr }, 'redis-server', 'a server stopped on its own', eventually);
  });

  for (const { signal, exitCode } of [
    { signal: 'SIGINT', exitCode: 130 },
    { signal: 'SIGTERM', exitCode: 143 },
  ] as const) {
    it(`prints REDIS_URL and MONGODB_URI of servers that serve on the LOCAL_* ports; ${signal} to the npm process stops them and it exits by ${signal}`, async () => {
      const run = await startServices();
      const { npm, ports, exited } = run;
      const stderr = () => run.stderr();
      const redis = new Redis(`redis://127.0.0.1:${ports.LOCAL_REDIS_PORT}`, { lazyConnect: true, maxRetriesPerRequest: 1 });
      const mongo = new MongoClient(`mongodb://127.0.0.1:${ports.LOCAL_MONGODB_PORT}/feedback`, { serverSelectionTimeoutMS: 10_000 });
      try {
        await redis.connect();
        // What npm start's Redis runs with: production's settings.
        expect(await redis.config('GET', 'appendonly')).to.deep.equal(['appendonly', 'yes']);
        expect(await redis.config('GET', 'maxmemory-policy')).to.deep.equal(['maxmemory-policy', 'noeviction']);
        const col = mongo.db('feedback').collection<{ _id: string; n: number }>('services_check');
        await col.insertOne({ _id: 'a', n: 1 });
        expect(await col.findOne({ _id: 'a' })).to.deep.equal({ _id: 'a', n: 1 });
        const info = await mongo.db('feedback').admin().command({ buildInfo: 1 });
        expect(info['ferretdb'], 'FerretDB v2 names itself in buildInfo').to.have.property('version', 'v2.5.0');
      } finally {
        redis.disconnect();
        await mongo.close();
      }

      seen = descendants(npm.pid!);
      const commands = seen.map((p) => p.command);
      for (const part of ['scripts/services.sh', 'redis-server', 'ferretdb']) {
        expect(commands.some((c) => c.includes(part)), `a descendant running ${part} in ${JSON.stringify(commands)}`).to.equal(true);
      }
      // Only the servers: no API, no worker.
      expect(commands.filter((c) => c.includes('dist/') || c.includes('main.ts'))).to.deep.equal([]);
      const pg = postmaster(join(run.runDir, 'postgres'));
      expect(pg, 'the private PostgreSQL in LOCAL_RUN_DIR/postgres').to.not.equal(undefined);
      seen.push(pg!);

      process.kill(npm.pid!, signal);
      const exit = await Promise.race([exited, new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), 60_000).unref())]);
      expect(exit, `npm run services still running 60 s after ${signal}:\n${stderr()}`).to.not.equal(undefined);
      expect(exit!.signal ?? exit!.code, stderr()).to.be.oneOf([signal, exitCode]);
      const left = await eventually(async () => (seen.filter(alive).length === 0 ? [] : undefined), 30_000, `every process npm run services started to be gone after ${signal}`).catch(() =>
        seen.filter(alive).map((p) => `${p.pid} ${p.command}`),
      );
      expect(left, stderr()).to.deep.equal([]);
      for (const [name, port] of Object.entries(ports)) expect(await portAnswers(port), `${name} ${port} still answers`).to.equal(false);
      expect(stderr()).to.include(`SIG${signal.slice(3)} received: stopping`).and.include('services: stopped.');
    });
  }
});
