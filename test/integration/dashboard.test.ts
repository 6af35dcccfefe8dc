import { expect } from 'chai';
import { mkdirSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { presentedToken } from '../../api/dashboard.js';
import { OTHER_KEY, testConfig, TEST_KEY } from '../helpers/env.js';
import { recordBody, startStack, type Stack } from '../helpers/stack.js';

const ARTIFACTS = resolve('test-artifacts');
const get = (stack: Stack, path: string, headers: Record<string, string> = {}) => stack.request(path, { method: 'GET', headers });
const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

describe('GET /admin/queues (bull-board dashboard)', function () {
  this.timeout(90_000);
  let stack: Stack;
  before(async () => {
    // TEST_KEY carries the admin scope, OTHER_KEY does not; no worker, so a queued job stays visible.
    stack = await startStack(testConfig({ ADMIN_API_KEY_NAMES: TEST_KEY.name }), { worker: false });
    const queued = await stack.post('/feedback-record', recordBody({ record: { field_to_value: { prompt: 'shown in the dashboard' } } }));
    expect(queued.status).to.equal(200);
  });
  after(async () => {
    await stack?.close();
  });

  it('reads the token of a Bearer header or the password of Basic credentials, nothing else', () => {
    expect(presentedToken(`Bearer ${TEST_KEY.secret}`)).to.equal(TEST_KEY.secret);
    expect(presentedToken(basic('anyone', 'pa:ss'))).to.equal('pa:ss');
    expect(presentedToken(basic('anyone', ''))).to.equal(undefined);
    expect(presentedToken('Basic !!!')).to.equal(undefined);
    expect(presentedToken('Digest x')).to.equal(undefined);
    expect(presentedToken('')).to.equal(undefined);
  });

  it('asks a browser to log in (401 with a Basic challenge) when no key is sent', async () => {
    const res = await get(stack, '/admin/queues');
    expect(res.status).to.equal(401);
    expect(res.headers.get('www-authenticate')).to.match(/^Basic realm=/);
    expect(res.body.error.code).to.equal('unauthorized');
  });

  it('answers 401 invalid_api_key to an unknown key and 403 forbidden to a key without the admin scope', async () => {
    const unknown = await get(stack, '/admin/queues', { Authorization: basic('ops', 'not-a-key-at-all-000') });
    expect(unknown.status).to.equal(401);
    expect(unknown.body.error.code).to.equal('invalid_api_key');
    const notAdmin = await get(stack, '/admin/queues', { Authorization: `Bearer ${OTHER_KEY.secret}` });
    expect(notAdmin.status).to.equal(403);
    expect(notAdmin.body.error.code).to.equal('forbidden');
    // The dashboard's JSON API is behind the same guard, not only its page.
    const api = await get(stack, '/admin/queues/api/queues', { Authorization: `Bearer ${OTHER_KEY.secret}` });
    expect(api.status).to.equal(403);
  });

  it('serves the queue, with its jobs decoded, to an admin key', async () => {
    const res = await get(stack, '/admin/queues/api/queues?activeQueue=' + stack.config.queueName + '&status=waiting', { Authorization: `Bearer ${TEST_KEY.secret}` });
    expect(res.status).to.equal(200);
    const queue = (res.body.queues as { name: string; jobs: { data: unknown }[] }[]).find((q) => q.name === stack.config.queueName);
    expect(queue, 'the write queue is listed').to.not.equal(undefined);
    expect(JSON.stringify(queue!.jobs.map((j) => j.data))).to.include('shown in the dashboard');
  });

  it('loads in a real headless browser (Chromium via playwright-core) and shows the queue; screenshot saved', async () => {
    const executablePath = process.env['CHROMIUM_BIN'] ?? '/usr/bin/chromium';
    let browser: Browser | undefined;
    try {
      browser = await chromium.launch({ executablePath, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
      const context = await browser.newContext({ httpCredentials: { username: 'ops', password: TEST_KEY.secret }, viewport: { width: 1280, height: 800 } });
      const page = await context.newPage();
      const response = await page.goto(`${stack.baseUrl}/admin/queues`, { waitUntil: 'load' });
      expect(response?.status()).to.equal(200);
      await page.getByText(stack.config.queueName).first().waitFor({ state: 'visible', timeout: 30_000 });
      mkdirSync(ARTIFACTS, { recursive: true });
      const file = join(ARTIFACTS, 'dashboard.png');
      await page.screenshot({ path: file, fullPage: true });
      expect(statSync(file).size).to.be.greaterThan(1000);
    } finally {
      await browser?.close();
    }
  });
});
