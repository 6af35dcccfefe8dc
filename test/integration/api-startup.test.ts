import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:net';
import { DEV_API_KEY_SECRET } from '../../api/dev-key-guard.js';
import { Agent, request } from 'node:http';
import { TEST_KEY, testConfig, uniqueName } from '../helpers/env.js';
import { recordBody, startStack } from '../helpers/stack.js';
import { sharedServices } from '../helpers/root-hooks.js';
import { freePort } from '../../devkit/servers.js';

interface Run {
  readonly code: number | null;
  readonly output: string;
}

/**
 * `node --import tsx api/main.ts` as the Procfile runs it, with the shared services and `port`.
 * `whenListening` runs once the process has logged "api listening", then the process gets SIGTERM.
 * `env` overrides the variables set here.
 */
function runApi(port: number, whenListening?: () => Promise<void>, env: Record<string, string> = {}): Promise<Run> {
  const { redisUrl, mongoUrl } = sharedServices();
  const name = uniqueName('startup');
  const child = spawn(process.execPath, ['--import', 'tsx', 'api/main.ts'], {
    env: {
      ...process.env,
      PORT: String(port),
      HOST: '127.0.0.1',
      REDIS_URL: redisUrl,
      MONGODB_URI: `${mongoUrl}/${name.replace(/-/g, '_')}`,
      QUEUE_NAME: name,
      API_KEYS: `${TEST_KEY.name}:${TEST_KEY.secret}`,
      ID_SIGNING_SECRETS: 'test-id-signing-secret-0123456789',
      LOG_LEVEL: 'info',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  let announced = false;
  const checks: Promise<void>[] = [];
  const collect = (chunk: string) => {
    output += chunk;
    if (!announced && output.includes('"api listening"') && whenListening !== undefined) {
      announced = true;
      checks.push(whenListening().finally(() => child.kill('SIGTERM')));
    }
  };
  child.stdout.setEncoding('utf8').on('data', collect);
  child.stderr.setEncoding('utf8').on('data', collect);
  const killer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  return new Promise((resolve, reject) => {
    child.once('close', (code) => {
      clearTimeout(killer);
      Promise.all(checks).then(() => resolve({ code, output }), reject);
    });
  });
}

describe('API start-up', function () {
  this.timeout(60_000);

  describe('when its port is taken', () => {
    let blocker: Server;
    let port: number;
    before(async () => {
      blocker = createServer();
      await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', () => resolve()));
      port = (blocker.address() as { port: number }).port;
    });
    after(() => new Promise<void>((resolve) => blocker.close(() => resolve())));

    it('prints one clear line and exits 1, with no stack trace and no "api listening"', async () => {
      const run = await runApi(port);
      expect(run.code, run.output).to.equal(1);
      const lines = run.output.split('\n').filter((l) => l.includes('cannot listen'));
      expect(lines, run.output).to.deep.equal([`cannot listen on 127.0.0.1:${port}: address already in use`]);
      expect(run.output).to.not.match(/\n\s+at |EADDRINUSE|Error:/);
      expect(run.output).to.not.include('api listening');
    });
  });

  it('logs "api listening" only once it answers on its port, and stops cleanly on SIGTERM', async () => {
    const port = await freePort();
    let health: number | undefined;
    const run = await runApi(port, async () => {
      // No retry: the line promises the port is bound.
      health = (await fetch(`http://127.0.0.1:${port}/healthz`)).status;
    });
    expect(health, run.output).to.equal(200);
    expect(run.code, run.output).to.equal(0);
    const listening = run.output.split('\n').filter((l) => l.includes('"api listening"'));
    expect(listening).to.have.length(1);
    // `npm start` shows the dataset mode (docs/datasets/README.md): the default is open.
    expect(JSON.parse(listening[0]!)).to.include({ host: '127.0.0.1', port, datasets: 'open', defined_datasets: 0 });
  });

  it('with a Redis it has never reached, answers a write and /readyz with 503 within ENQUEUE_TIMEOUT_MS instead of hanging', async () => {
    const port = await freePort();
    const deadPort = await freePort(); // nothing listens: the connection is refused for ever
    const answers: { status: number; code?: string; ms: number }[] = [];
    const run = await runApi(port, async () => {
      for (const [path, init] of [
        ['/feedback-record', { method: 'POST', headers: { Authorization: `Bearer ${TEST_KEY.secret}`, 'Content-Type': 'application/json' }, body: JSON.stringify({ record: { feedback_dataset_id: 'd', field_to_value: { a: 1 } }, response: { values: { a: 1 } } }) }],
        ['/readyz', {}],
      ] as const) {
        const started = Date.now();
        const res = await fetch(`http://127.0.0.1:${port}${path}`, { ...init, signal: AbortSignal.timeout(10_000) });
        const body = (await res.json()) as { error?: { code?: string } };
        answers.push({ status: res.status, ...(body.error?.code === undefined ? {} : { code: body.error.code }), ms: Date.now() - started });
      }
    }, { REDIS_URL: `redis://127.0.0.1:${deadPort}`, ENQUEUE_TIMEOUT_MS: '1500' });
    expect(run.code, run.output).to.equal(0);
    expect(answers.map((a) => [a.status, a.code]), run.output).to.deep.equal([[503, 'queue_unavailable'], [503, undefined]]);
  });

  describe('with the development key', () => {
    const DEV_KEYS = `dev:${DEV_API_KEY_SECRET}`;

    it('refuses to start on a non-loopback HOST: one line naming HOST, exit 1, never listening', async () => {
      const port = await freePort();
      const run = await runApi(port, undefined, { API_KEYS: DEV_KEYS, HOST: '0.0.0.0' });
      expect(run.code, run.output).to.equal(1);
      const lines = run.output.split('\n').filter((l) => l.includes('refusing to start'));
      expect(lines, run.output).to.have.length(1);
      expect(lines[0]).to.match(/^refusing to start: .*HOST=0\.0\.0\.0 is not a loopback address/);
      expect(run.output).to.not.match(/\n\s+at |Error:/);
      expect(run.output).to.not.include('api listening');
      expect(run.output).to.not.include(DEV_API_KEY_SECRET);
    });

    it('starts on loopback, accepts the key, and says which Redis and MongoDB (URI and database) it uses', async () => {
      const port = await freePort();
      let status: number | undefined;
      const run = await runApi(
        port,
        async () => {
          status = (await fetch(`http://127.0.0.1:${port}/feedback-record`, { method: 'POST', headers: { Authorization: 'Bearer nope' }, body: '{}' })).status;
          const res = await fetch(`http://127.0.0.1:${port}/feedback-record`, {
            method: 'POST',
            headers: { Authorization: `Bearer ${DEV_API_KEY_SECRET}`, 'Content-Type': 'application/json' },
            body: JSON.stringify({ record: { feedback_dataset_id: 'ds-startup', field_to_value: { q: 1 } }, response: { values: { v: 1 } } }),
          });
          expect(status, 'a wrong key').to.equal(401);
          status = res.status;
        },
        { API_KEYS: DEV_KEYS, HOST: '127.0.0.1' },
      );
      expect(status, run.output).to.equal(200);
      expect(run.code, run.output).to.equal(0);
      const using = run.output.split('\n').filter((l) => l.includes('"using Redis'));
      expect(using, run.output).to.have.length(1);
      const line = JSON.parse(using[0]!) as Record<string, unknown>;
      const { redisUrl, mongoUrl } = sharedServices();
      expect(line['redis']).to.equal(redisUrl);
      expect(String(line['mongodb'])).to.match(new RegExp(`^${mongoUrl}/startup_[0-9a-f]{8}$`));
      expect(line['database']).to.equal(String(line['mongodb']).split('/').pop());
    });
  });
});

describe('API shutdown under keep-alive traffic', () => {
  it('answers a request that arrives on a kept-alive connection after close() with Connection: close, and closes before the keep-alive timeout', async () => {
    // A keep-alive timeout far beyond the test's bound: close() may not wait for it.
    const stack = await startStack(testConfig({ HTTP_KEEP_ALIVE_TIMEOUT_MS: '60000', HTTP_HEADERS_TIMEOUT_MS: '61000', HTTP_REQUEST_TIMEOUT_MS: '120000' }));
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    /** A write; `midway` runs once half its body is sent (the server is then reading it). */
    const post = (midway?: () => void): Promise<{ status: number; connection: string | undefined }> =>
      new Promise((resolve, reject) => {
        const body = JSON.stringify(recordBody());
        const req = request(`${stack.baseUrl}/feedback-record`, { method: 'POST', agent, headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body), Authorization: `Bearer ${TEST_KEY.secret}` } }, (res) => {
          res.resume();
          res.on('end', () => resolve({ status: res.statusCode ?? 0, connection: res.headers.connection }));
        });
        req.on('error', reject);
        if (midway === undefined) return void req.end(body);
        req.write(body.slice(0, 10));
        setTimeout(() => {
          midway();
          req.end(body.slice(10));
        }, 300);
      });
    try {
      // One connection kept busy: a request always in flight, as a load balancer's pool does.
      const before = await post();
      expect(before).to.deep.equal({ status: 200, connection: 'keep-alive' });
      let closing: Promise<void> | undefined;
      const first = await post(() => (closing = stack.api.close()));
      expect(first.status).to.equal(200);
      const next = await post().catch(() => undefined);
      // Either the connection was closed as it turned idle (the next request opened a new one,
      // refused) or the request reached it first and was told to close it.
      if (next !== undefined) expect(next.connection).to.equal('close');
      let closed = false;
      void closing!.then(() => (closed = true));
      const deadline = Date.now() + 10_000;
      while (!closed && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      expect(closed, 'close() finished, not held by the kept-alive connection').to.equal(true);
    } finally {
      agent.destroy();
      await stack.close();
    }
  });
});
