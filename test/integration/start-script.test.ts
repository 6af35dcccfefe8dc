import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEV_API_KEY_SECRET } from '../../api/dev-key-guard.js';
import { alive, cleanUpScriptRun, descendants, distinctFreePorts, killOneAndExpectStop, portAnswers, postmaster, type Proc } from '../helpers/process-tree.js';
import { eventually, recordBody } from '../helpers/stack.js';

/** Variables of the test run that would point the script at other servers or keys. */
const INHERITED_OUT = ['REDIS_URL', 'REDIS_TLS_URL', 'MONGODB_URI', 'API_KEYS', 'ADMIN_API_KEY_NAMES', 'HOST', 'PORT', 'QUEUE_NAME', 'LOG_LEVEL', 'NODE_ENV', 'ID_SIGNING_SECRETS'];

/**
 * `npm start` exactly as a newcomer runs it (the dev key, its own Redis and store), on free
 * ports and a temporary run directory, then one signal to the npm process alone.
 * Slow: each case builds with tsc and starts Redis, PostgreSQL with DocumentDB and FerretDB.
 */
describe('npm start (scripts/start.sh)', function () {
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

  /** `npm start` on free ports and a run directory of its own, once its API answers /healthz. */
  async function startNpm() {
    const ports = await distinctFreePorts(['PORT', 'LOCAL_REDIS_PORT', 'LOCAL_MONGODB_PORT', 'LOCAL_POSTGRES_PORT', 'LOCAL_FERRETDB_DEBUG_PORT'] as const);
    runDir = mkdtempSync(join(tmpdir(), 'fi-start-'));
    // As root the private PostgreSQL runs as an unprivileged user, which must traverse this directory.
    chmodSync(runDir, 0o711);
    const env: Record<string, string> = {};
    for (const [key, value] of Object.entries(process.env)) if (value !== undefined && !INHERITED_OUT.includes(key)) env[key] = value;
    Object.assign(env, Object.fromEntries(Object.entries(ports).map(([k, v]) => [k, String(v)])), { LOCAL_RUN_DIR: runDir });

    // Its own process group, so that no terminal signal reaches it and a failed case can clean up the group.
    const npm = spawn('npm', ['start'], { env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    child = npm;
    let output = '';
    npm.stdout!.setEncoding('utf8').on('data', (s: string) => (output += s));
    npm.stderr!.setEncoding('utf8').on('data', (s: string) => (output += s));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => npm.once('exit', (code, sig) => resolve({ code, signal: sig })));

    const api = `http://127.0.0.1:${ports.PORT}`;
    await eventually(
      async () => {
        if (npm.exitCode !== null) throw new Error(`npm start exited (${npm.exitCode}) before the API answered:\n${output}`);
        const res = await fetch(`${api}/healthz`).catch(() => undefined);
        return res?.status === 200 ? true : undefined;
      },
      180_000,
      'the API of npm start to answer /healthz',
    );
    return { npm, ports, exited, api, runDir, output: () => output };
  }

  it('a process that dies on its own (the worker killed) ends npm start with a message and a failing status, the rest stopped', async () => {
    const run = await startNpm();
    await eventually(async () => (run.output().includes('feedback-ingest is running.') ? true : undefined), 10_000, 'the start-up summary');
    seen = await killOneAndExpectStop(run, 'dist/worker/main.js', 'stopped on its own', eventually);
  });

  for (const { signal, exitCode } of [
    { signal: 'SIGTERM', exitCode: 143 },
    { signal: 'SIGINT', exitCode: 130 },
  ] as const) {
    it(`${signal} to the npm process alone stops everything it started (FerretDB v2 and its PostgreSQL), frees every port and exits`, async () => {
      const run = await startNpm();
      const { npm, ports, exited, api } = run;
      const output = () => run.output();

      // The development key works end to end: a write, and the admin pages.
      const auth = { Authorization: `Bearer ${DEV_API_KEY_SECRET}` };
      const write = await fetch(`${api}/feedback-record`, { method: 'POST', headers: { ...auth, 'Content-Type': 'application/json' }, body: JSON.stringify(recordBody()) });
      expect(write.status, await write.text()).to.equal(200);
      expect((await fetch(`${api}/admin/dead-letters`, { headers: auth })).status, 'GET /admin/dead-letters with the development key').to.equal(200);
      expect((await fetch(`${api}/admin/queues`, { headers: auth })).status, 'GET /admin/queues with the development key').to.equal(200);

      // It says what it runs on, and that it started its own servers on the ports it was given.
      await eventually(async () => (output().includes('feedback-ingest is running.') ? true : undefined), 10_000, 'the start-up summary');
      expect(output()).to.include(`Redis: started its own on 127.0.0.1:${ports.LOCAL_REDIS_PORT}`);
      expect(output()).to.include(`MongoDB: started its own FerretDB on 127.0.0.1:${ports.LOCAL_MONGODB_PORT}`);
      expect(output()).to.include('Authorization: Bearer dev-secret-key-change-me').and.match(/scopes: every one/);
      expect(output()).to.match(new RegExp(`"name":"api".*"redis":"redis://127\\.0\\.0\\.1:${ports.LOCAL_REDIS_PORT}","mongodb":"mongodb://127\\.0\\.0\\.1:${ports.LOCAL_MONGODB_PORT}/feedback","database":"feedback"`));
      expect(output()).to.match(new RegExp(`"name":"worker".*"redis":"redis://127\\.0\\.0\\.1:${ports.LOCAL_REDIS_PORT}"`));
      expect(output()).to.match(new RegExp(`"host":"127\\.0\\.0\\.1","port":${ports.PORT}.*"api listening"`));

      seen = descendants(npm.pid!);
      const commands = seen.map((p) => p.command);
      for (const part of ['scripts/start.sh', 'redis-server', 'ferretdb', 'dist/api/main.js', 'dist/worker/main.js']) {
        expect(commands.some((c) => c.includes(part)), `a descendant running ${part} in ${JSON.stringify(commands)}`).to.equal(true);
      }
      const pg = postmaster(join(run.runDir, 'postgres'));
      expect(pg, 'the private PostgreSQL of the run').to.not.equal(undefined);
      seen.push(pg!);

      process.kill(npm.pid!, signal);

      const exit = await Promise.race([exited, new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), 60_000).unref())]);
      expect(exit, `npm start still running 60 s after ${signal}:\n${output()}`).to.not.equal(undefined);
      // The script dies by the signal it got; npm then re-raises it on itself (a shell shows 128 + n).
      expect(exit!.signal ?? exit!.code, output()).to.be.oneOf([signal, exitCode]);
      const left = await eventually(
        async () => {
          const still = seen.filter(alive);
          return still.length === 0 ? [] : undefined;
        },
        30_000,
        `every process npm start started to be gone after ${signal}`,
      ).catch(() => seen.filter(alive).map((p) => `${p.pid} ${p.command}`));
      expect(left, output()).to.deep.equal([]);
      for (const [name, port] of Object.entries(ports)) expect(await portAnswers(port), `${name} ${port} still answers`).to.equal(false);
      expect(output()).to.include(`${signal} received: stopping`).and.include('feedback-ingest: stopped.');
    });
  }
});
