import { expect } from 'chai';
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { createFeedbackTokens } from '../../api/feedback-tokens.js';
import { testConfig, TEST_KEY } from '../helpers/env.js';
import { eventually, recordBody, responses, startStack, type Stack } from '../helpers/stack.js';
import { startStaticServer, type StaticServer } from '../helpers/static-server.js';

const EXAMPLE = resolve('examples/browser-feedback');
const ARTIFACTS = resolve('test-artifacts');

describe('examples/browser-feedback (the page in headless Chromium, served from another origin)', function () {
  this.timeout(90_000);
  let stack: Stack;
  let allowedSite: StaticServer;
  let otherSite: StaticServer;
  let browser: Browser;
  let recordId: string;

  before(async () => {
    // Two sites on two ports: two origins, only the first in CORS_ORIGINS; the API on a third.
    allowedSite = await startStaticServer(EXAMPLE);
    otherSite = await startStaticServer(EXAMPLE);
    stack = await startStack(testConfig({ CORS_ORIGINS: allowedSite.origin }));
    const created = await stack.post('/feedback-record', recordBody());
    expect(created.status, created.text).to.equal(200);
    recordId = created.body.feedback_record_id as string;
    browser = await chromium.launch({ executablePath: process.env['CHROMIUM_BIN'] ?? '/usr/bin/chromium', args: ['--no-sandbox', '--disable-dev-shm-usage'] });
  });
  after(async () => {
    await browser?.close();
    await stack?.close();
    await allowedSite?.close();
    await otherSite?.close();
  });

  /** What the chatbot's backend does: mint a token with its API key, never sent to the page. */
  async function mintToken(userId: string): Promise<string> {
    const res = await stack.post('/feedback-tokens', { feedback_record_id: recordId, user_id: userId, questions: ['rating', 'comment'] });
    expect(res.status, res.text).to.equal(200);
    return res.body.token as string;
  }

  async function openWidget(site: StaticServer, token: string): Promise<{ page: Page; console: string[] }> {
    const page = await browser.newPage();
    const console: string[] = [];
    page.on('console', (message) => console.push(message.text()));
    const query = new URLSearchParams({ api: stack.baseUrl, record: recordId, token });
    const res = await page.goto(`${site.origin}/index.html?${query.toString()}`);
    expect(res?.status()).to.equal(200);
    return { page, console };
  }

  /** The status line once it leaves idle/sending: `sent` or `error`, with its text. */
  async function settledStatus(page: Page): Promise<{ state: string; text: string }> {
    await page.locator('#status[data-state="sent"], #status[data-state="error"]').waitFor({ timeout: 30_000 });
    const status = page.locator('#status');
    return { state: (await status.getAttribute('data-state')) ?? '', text: await status.innerText() };
  }

  const storedFor = (userId: string) => responses(stack.db).findOne({ feedback_record_id: recordId, user_id: userId });

  it('a thumbs-up, then a comment, are stored under the token\'s annotator; screenshot saved', async () => {
    const { page } = await openWidget(allowedSite, await mintToken('browser-user-1'));
    await page.click('#thumb-up');
    expect(await settledStatus(page)).to.deep.equal({ state: 'sent', text: 'Thanks for your feedback!' });
    const first = await eventually(async () => (await storedFor('browser-user-1')) ?? undefined, 15_000, 'the thumbs-up stored');
    expect(first['values']).to.deep.equal({ rating: 'up' });
    expect(first['status']).to.equal('submitted');
    expect(first['api_key']).to.equal(TEST_KEY.name);

    // Back to idle, so that the next settled status is the comment's, not the thumb's.
    await page.evaluate("document.getElementById('status').dataset.state = 'idle'");
    await page.fill('#comment', 'Clear and short.');
    await page.click('#send-comment');
    expect((await settledStatus(page)).state).to.equal('sent');
    await eventually(async () => {
      const doc = await storedFor('browser-user-1');
      return doc !== null && JSON.stringify(doc['values']) === JSON.stringify({ rating: 'up', comment: 'Clear and short.' }) ? doc : undefined;
    }, 15_000, 'the comment stored with the rating');
    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, 'browser-feedback.png') });
    await page.close();
  });

  it('an expired token shows a clear error in the page, and nothing is stored', async () => {
    const issuedTwoHoursAgo = createFeedbackTokens({ secrets: stack.config.idSigningSecrets, defaultTtlSeconds: 60, maxTtlSeconds: 3600, now: () => Date.now() - 2 * 3600_000 });
    const { token } = await issuedTwoHoursAgo.mint({ recordId, userId: 'browser-expired', questions: ['rating'], issuedBy: TEST_KEY.name });
    const { page } = await openWidget(allowedSite, token);
    await page.click('#thumb-down');
    const status = await settledStatus(page);
    expect(status.state).to.equal('error');
    expect(status.text).to.equal('This feedback link has expired. Reload the conversation to rate this answer again.');
    expect(await page.locator('#status').getAttribute('data-code')).to.equal('token_expired');
    // Refused before queueing: there is nothing to wait for.
    expect(await storedFor('browser-expired')).to.equal(null);
    await page.close();
  });

  it('a page on an origin not in CORS_ORIGINS is refused by the browser (CORS), and nothing is stored', async () => {
    const { page, console } = await openWidget(otherSite, await mintToken('browser-other-origin'));
    await page.click('#thumb-up');
    expect(await settledStatus(page)).to.deep.equal({ state: 'error', text: 'Could not reach the feedback service.' });
    expect(console.join('\n')).to.match(/blocked by CORS policy/);
    // The preflight failed, so the POST was never sent.
    expect(await storedFor('browser-other-origin')).to.equal(null);
    await page.close();
  });
});
