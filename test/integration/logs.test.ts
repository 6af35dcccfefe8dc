import { expect } from 'chai';
import { Writable } from 'node:stream';
import { createKeyVerifier } from '../../api/key-verifier.js';
import { loadConfig } from '../../shared/config.js';
import { createLogger, type Logger } from '../../shared/logger.js';
import { sharedServices } from '../helpers/root-hooks.js';
import { startRedis, type ManagedServer } from '../../devkit/servers.js';
import { OTHER_KEY, testConfig, TEST_KEY } from '../helpers/env.js';
import { eventually, records, startStack, type Stack } from '../helpers/stack.js';

/** A logger at `trace` whose JSON lines are kept in memory. */
function capturingLogger(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(...chunk.toString('utf8').split('\n').filter((l) => l !== ''));
      done();
    },
  });
  return { logger: createLogger({ level: 'trace', name: 'test', destination }), lines };
}

describe('logs', function () {
  this.timeout(60_000);

  describe('secrets never reach the logs', () => {
    const SIGNING_SECRET = 'log-test-id-signing-secret-ABCDEFGH';
    const WRONG_TOKEN = 'wrong-token-that-must-not-be-logged-7x';
    const BODY_MARKER = 'body-text-that-must-not-be-logged-9q';
    let stack: Stack;
    let lines: string[];

    before(async () => {
      const capture = capturingLogger();
      lines = capture.lines;
      stack = await startStack(testConfig({ ID_SIGNING_SECRETS: SIGNING_SECRET, LOG_LEVEL: 'trace' }), { logger: capture.logger });
      const post = (path: string, token: string, body: unknown, headers: Record<string, string> = {}) =>
        stack.request(path, { method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json', ...headers }, body: JSON.stringify(body) });
      const valid = { record: { feedback_dataset_id: 'ds-logs', field_to_value: { prompt: BODY_MARKER } }, response: { values: { comment: BODY_MARKER } } };
      const ok = await post('/feedback-record', TEST_KEY.secret, valid, { 'Idempotency-Key': 'log-test-1' });
      expect(ok.status, ok.text).to.equal(200);
      await post('/feedback-record', TEST_KEY.secret, valid, { 'Idempotency-Key': 'log-test-1' });
      await post('/feedback-record', OTHER_KEY.secret, { ...valid, unknown: BODY_MARKER });
      await post('/feedback-record', WRONG_TOKEN, valid);
      await post('/feedback-response', TEST_KEY.secret, { feedback_record_id: ok.body.feedback_record_id, response: { status: 'draft', values: { c: BODY_MARKER } } });
      await stack.request('/feedback-record', { method: 'POST', headers: { Authorization: `Basic ${Buffer.from(`u:${TEST_KEY.secret}`).toString('base64')}` }, body: '{' });
      // The worker logs too: wait until it has stored the record.
      await eventually(async () => ((await records(stack.db).countDocuments({ feedback_dataset_id: 'ds-logs' })) > 0 ? true : undefined), 20_000, 'the record to be stored');
    });
    after(async () => {
      await stack?.close();
    });

    it('one JSON line per request, and the request id travels with the write into the worker\'s job line', async () => {
      const requestId = 'trace-me-through-the-queue-42';
      const res = await stack.request('/feedback-record', { method: 'POST', headers: { Authorization: `Bearer ${TEST_KEY.secret}`, 'Content-Type': 'application/json', 'X-Request-Id': requestId }, body: JSON.stringify({ record: { feedback_dataset_id: 'ds-logs', field_to_value: { q: 1 } }, response: { values: { v: 1 } } }) });
      expect(res.status).to.equal(200);
      const parsed = () => lines.map((l) => JSON.parse(l) as Record<string, unknown>);
      const requestLine = parsed().find((l) => l['msg'] === 'request' && l['request_id'] === requestId);
      expect(requestLine, 'the API request line').to.include({ method: 'POST', path: '/feedback-record', status: 200, api_key: TEST_KEY.name });
      const jobLine = await eventually(async () => parsed().find((l) => l['msg'] === 'job stored' && Array.isArray(l['request_ids']) && (l['request_ids'] as unknown[]).includes(requestId)), 20_000, 'the worker\'s job line');
      expect(jobLine['job_id']).to.be.a('string');
      expect(jobLine['records']).to.be.at.least(1);
    });

    it('the run logged requests at trace level (the check below is not vacuous)', () => {
      expect(lines.length).to.be.greaterThan(5);
      expect(lines.some((l) => l.includes('"request_id"'))).to.equal(true);
    });

    for (const [what, secret] of [
      ['the API key secrets', [TEST_KEY.secret, OTHER_KEY.secret]],
      ['a wrong token that was sent', [WRONG_TOKEN]],
      ['the Basic credentials', [Buffer.from(`u:${TEST_KEY.secret}`).toString('base64')]],
      ['the id signing secret', [SIGNING_SECRET]],
      ['body contents', [BODY_MARKER]],
    ] as const) {
      it(`holds none of ${what}`, () => {
        for (const s of secret) expect(lines.filter((l) => l.includes(s)), `lines with ${s}`).to.deep.equal([]);
      });
    }
  });

  describe('key comparison', () => {
    it('compares digests of equal length whatever the token length, and checks every key', () => {
      // A verifier that stopped at the first match or compared raw strings would answer these
      // the same; what is checked here is that tokens of any length are compared safely (no
      // timingSafeEqual length error) and that a later key is still found.
      const keys = loadConfig({ API_KEYS: `a:${'x'.repeat(40)},b:short-secret-b,c:sha256:${'0'.repeat(64)}` }).apiKeys;
      const verifier = createKeyVerifier(keys);
      expect(verifier.verify('short-secret-b')).to.deep.equal({ name: 'b', datasets: null, admin: false, read: false });
      expect(verifier.verify('x'.repeat(40))).to.deep.equal({ name: 'a', datasets: null, admin: false, read: false });
      for (const token of ['', 'x', 'x'.repeat(39), 'x'.repeat(41), 'short-secret-B', 'y'.repeat(10_000)]) expect(verifier.verify(token)).to.equal(undefined);
    });
  });

  describe('Redis maxmemory-policy', () => {
    let lru: ManagedServer | undefined;
    after(async () => {
      await lru?.stop();
    });

    /** The lines about the policy that the API and the worker logged at start-up, parsed. */
    async function policyLines(redisUrl: string): Promise<Record<string, unknown>[]> {
      const capture = capturingLogger();
      const stack = await startStack(testConfig({}, { redisUrl, mongoUrl: sharedServices().mongoUrl }), { logger: capture.logger });
      try {
        const found = () => capture.lines.filter((l) => l.includes('"maxmemory_policy"')).map((l) => JSON.parse(l) as Record<string, unknown>);
        await eventually(async () => (found().length >= 2 ? true : undefined), 10_000, 'the API\'s and the worker\'s policy check');
        return found();
      } finally {
        await stack.close();
      }
    }

    it('the API and the worker each warn at start-up when Redis may evict keys (allkeys-lru)', async () => {
      lru = await startRedis({ maxmemoryPolicy: 'allkeys-lru' });
      const lines = await policyLines(lru.url);
      expect(lines).to.have.length(2);
      for (const line of lines) {
        expect(line).to.include({ level: 'warn', maxmemory_policy: 'allkeys-lru' });
        expect(String(line['msg'])).to.match(/noeviction/);
      }
    });

    it('and neither warns when it runs noeviction', async () => {
      const lines = await policyLines(sharedServices().redisUrl);
      expect(lines.map((l) => [l['level'], l['maxmemory_policy']])).to.deep.equal([
        ['info', 'noeviction'],
        ['info', 'noeviction'],
      ]);
    });
  });

  describe('Redis persistence', () => {
    let durable: ManagedServer | undefined;
    after(async () => {
      await durable?.destroy();
    });

    /** The lines about AOF that the API and the worker logged at start-up, parsed. */
    async function aofLines(redisUrl: string): Promise<Record<string, unknown>[]> {
      const capture = capturingLogger();
      const stack = await startStack(testConfig({}, { redisUrl, mongoUrl: sharedServices().mongoUrl }), { logger: capture.logger });
      try {
        const found = () => capture.lines.filter((l) => l.includes('"aof_enabled"')).map((l) => JSON.parse(l) as Record<string, unknown>);
        await eventually(async () => (found().length >= 2 ? true : undefined), 10_000, 'the API\'s and the worker\'s AOF check');
        return found();
      } finally {
        await stack.close();
      }
    }

    it('the API and the worker each warn at start-up when Redis runs with AOF off (appendonly no)', async () => {
      // The shared test Redis runs --appendonly no.
      const lines = await aofLines(sharedServices().redisUrl);
      expect(lines).to.have.length(2);
      for (const line of lines) {
        expect(line).to.include({ level: 'warn', aof_enabled: false });
        expect(String(line['msg'])).to.match(/AOF is off.*appendonly yes/);
      }
    });

    it('and neither warns when AOF is on', async () => {
      durable = await startRedis({ durable: true });
      const lines = await aofLines(durable.url);
      expect(lines.map((l) => [l['level'], l['aof_enabled']])).to.deep.equal([
        ['info', true],
        ['info', true],
      ]);
    });
  });
});
