import { createHash, createHmac, randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { createKeyStore } from '../../api/key-store.js';
import { startApi } from '../../api/server.js';
import { ApiKeyAdminError, createApiKeyAdmin, type ApiKeyAdmin } from '../../shared/api-keys.js';
import { loadConfig } from '../../shared/config.js';
import { createIdMinter } from '../../shared/ids.js';
import { COLLECTIONS, createMongo } from '../../shared/mongo.js';
import { runKeysCommand } from '../../scripts/keys.js';
import { OTHER_KEY, testConfig, TEST_KEY } from '../helpers/env.js';
import { runCli } from '../helpers/cli.js';
import { startFerretDb } from '../../devkit/servers.js';
import { eventually, recordBody, silentLogger, startStack, type HttpResult, type Stack } from '../helpers/stack.js';

const ADMIN_ENV_KEY = { name: 'ops', secret: 'ops-secret-key-0003' } as const;
const API_KEYS = `${TEST_KEY.name}:${TEST_KEY.secret},${OTHER_KEY.name}:${OTHER_KEY.secret},${ADMIN_ENV_KEY.name}:${ADMIN_ENV_KEY.secret}`;

/** Runs the keys command in-process; returns its exit code and output lines. */
async function keys(admin: ApiKeyAdmin, ...argv: string[]): Promise<{ code: number; out: string[]; err: string[] }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runKeysCommand(argv, admin, { out: (l) => out.push(l), err: (l) => err.push(l) });
  return { code, out, err };
}

function secretOf(lines: readonly string[]): string {
  const line = lines.find((l) => l.startsWith('secret: '));
  expect(line, lines.join('\n')).to.be.a('string');
  return line!.slice('secret: '.length);
}

describe('API keys in MongoDB', () => {
  let stack: Stack;
  let admin: ApiKeyAdmin;
  const as = (secret: string) => ({ Authorization: `Bearer ${secret}` });
  const get = (path: string, secret?: string): Promise<HttpResult> => stack.request(path, { headers: secret === undefined ? {} : as(secret) });

  before(async () => {
    stack = await startStack(testConfig({ API_KEYS, ADMIN_API_KEY_NAMES: ADMIN_ENV_KEY.name, API_KEYS_REFRESH_MS: '100' }), { worker: false });
    admin = createApiKeyAdmin({ db: stack.db, reservedNames: stack.config.apiKeys.map((k) => k.name) });
  });
  after(async () => {
    await stack?.close();
  });

  it('a key created with the keys command is accepted, and only its digest is stored', async () => {
    const created = await keys(admin, 'create', '--name', 'bot-1');
    expect(created.code, created.err.join('\n')).to.equal(0);
    const secret = secretOf(created.out);
    expect(secret).to.match(/^fik_[A-Za-z0-9_-]{43}$/);
    const res = await eventually(async () => {
      const r = await stack.post('/feedback-record', recordBody(), as(secret));
      return r.status === 401 ? undefined : r;
    }, 10_000, 'the new key to be loaded');
    expect(res.status).to.equal(200);

    const docs = await stack.db.collection(COLLECTIONS.apiKeys).find({ name: 'bot-1' }).toArray();
    expect(docs).to.have.length(1);
    expect(docs[0]!['_id']).to.equal(createHash('sha256').update(secret).digest('hex'));
    expect(JSON.stringify(docs)).to.not.include(secret);
  });

  it('a revoked key stops working after a refresh', async () => {
    const secret = secretOf((await keys(admin, 'create', '--name', 'short-lived')).out);
    await eventually(async () => ((await stack.post('/feedback-record', recordBody(), as(secret))).status === 200 ? true : undefined), 10_000, 'key accepted');
    const revoked = await keys(admin, 'revoke', 'short-lived');
    expect(revoked.code).to.equal(0);
    const res = await eventually(async () => {
      const r = await stack.post('/feedback-record', recordBody(), as(secret));
      return r.status === 200 ? undefined : r;
    }, 10_000, 'the revocation to take effect');
    expect(res.status).to.equal(401);
    expect(res.body.error.code).to.equal('invalid_api_key');
    expect((await keys(admin, 'revoke', 'short-lived')).code, 'revoking twice').to.equal(1);
    expect((await admin.list()).map((k) => k.name)).to.not.include('short-lived');
    expect((await admin.list({ includeRevoked: true })).find((k) => k.name === 'short-lived')?.revoked_at).to.be.instanceOf(Date);
  });

  it('names are unique among active keys and may not be names of API_KEYS', async () => {
    await admin.create({ name: 'unique-1' });
    await expectAdminError(admin.create({ name: 'unique-1' }), /already named/);
    await expectAdminError(admin.create({ name: TEST_KEY.name }), /API_KEYS/);
    await expectAdminError(admin.create({ name: 'bad name' }), /name must be/);
    await expectAdminError(admin.create({ name: 'x', datasets: [] }), /at least one dataset/);
    await expectAdminError(admin.create({ name: 'x', rateLimitPerMinute: 0 }), /rate limit/);
    await admin.revoke('unique-1');
    await admin.create({ name: 'unique-1' });
    const usage = await keys(admin, 'create');
    expect(usage.code).to.equal(2);
  });

  describe('dataset scope', () => {
    let scoped: string;
    before(async () => {
      scoped = (await admin.create({ name: 'scoped', datasets: ['ds_a', 'ds_c'], rateLimitPerMinute: 1000 })).secret;
      await eventually(async () => ((await stack.post('/feedback-record', recordBody({ record: { feedback_dataset_id: 'ds_a' } }), as(scoped))).status === 200 ? true : undefined), 10_000, 'scoped key accepted');
    });

    it('POST /feedback-record: 200 on its datasets, 403 forbidden on another', async () => {
      expect((await stack.post('/feedback-record', recordBody({ record: { feedback_dataset_id: 'ds_c' } }), as(scoped))).status).to.equal(200);
      const res = await stack.post('/feedback-record', recordBody({ record: { feedback_dataset_id: 'ds_b' } }), as(scoped));
      expect(res.status).to.equal(403);
      expect(res.body.error.code).to.equal('forbidden');
    });

    it('POST /feedback-response: 200 on a record of its dataset (still queued), 403 forbidden on another dataset', async () => {
      const own = await stack.post('/feedback-record', recordBody({ record: { feedback_dataset_id: 'ds_a' } }), as(scoped));
      const foreign = await stack.post('/feedback-record', recordBody({ record: { feedback_dataset_id: 'ds_b' } }));
      expect(own.status).to.equal(200);
      expect(foreign.status).to.equal(200);
      const answer = (id: string, secret: string) => stack.post('/feedback-response', { feedback_record_id: id, response: { status: 'draft', values: { helpful: 2 } } }, as(secret));

      expect((await answer(own.body.feedback_record_id, scoped)).status).to.equal(200);
      const denied = await answer(foreign.body.feedback_record_id, scoped);
      expect(denied.status).to.equal(403);
      expect(denied.body.error.code).to.equal('forbidden');
      // A key without a dataset scope answers either.
      expect((await answer(foreign.body.feedback_record_id, TEST_KEY.secret)).status).to.equal(200);
      expect((await answer(own.body.feedback_record_id, TEST_KEY.secret)).status).to.equal(200);
    });

    it('the same holds for records minted with an Idempotency-Key (seeded ids)', async () => {
      const rec = await stack.post('/feedback-record', recordBody({ record: { feedback_dataset_id: 'ds_b' } }), { 'Idempotency-Key': `k-${randomBytes(4).toString('hex')}` });
      expect(rec.status).to.equal(200);
      const res = await stack.post('/feedback-response', { feedback_record_id: rec.body.feedback_record_id, response: { status: 'draft', values: { helpful: 2 } } }, as(scoped));
      expect(res.status).to.equal(403);
    });

    it('a record id minted before dataset fingerprints is 403 for a scoped key, 200 for others', async () => {
      // What the previous release minted: time + random body, signed with the same secret.
      const body = randomBytes(16);
      body.writeUIntBE(Date.now(), 0, 6);
      const tag = createHmac('sha256', stack.config.idSigningSecrets[0]!).update('record-id\0').update(body).digest().subarray(0, 9);
      const legacy = `rec_${body.toString('base64url')}${tag.toString('base64url')}`;
      expect(createIdMinter(stack.config.idSigningSecrets).isMintedRecordId(legacy)).to.equal(true);
      const answer = (secret: string) => stack.post('/feedback-response', { feedback_record_id: legacy, response: { status: 'draft', values: { helpful: 2 } } }, as(secret));
      expect((await answer(scoped)).status).to.equal(403);
      expect((await answer(TEST_KEY.secret)).status).to.equal(200);
    });
  });

  describe('admin scope', () => {
    let storedAdmin: string;
    let storedPlain: string;
    before(async () => {
      storedAdmin = (await admin.create({ name: 'stored-admin', admin: true, read: false })).secret;
      storedPlain = (await admin.create({ name: 'stored-plain' })).secret;
      // A refresh may run between the two inserts: wait until both keys are loaded (401 = unknown).
      await eventually(async () => ((await get('/admin/dead-letters', storedAdmin)).status === 200 ? true : undefined), 10_000, 'stored admin key loaded');
      await eventually(async () => ((await get('/admin/dead-letters', storedPlain)).status === 403 ? true : undefined), 10_000, 'stored plain key loaded');
    });

    it('admin endpoints: 200 for admin keys (ADMIN_API_KEY_NAMES or stored with --admin), 403 forbidden for others, 401 without a key', async () => {
      expect((await get('/admin/dead-letters', ADMIN_ENV_KEY.secret)).status).to.equal(200);
      expect((await get('/admin/dead-letters', storedAdmin)).status).to.equal(200);
      for (const secret of [TEST_KEY.secret, storedPlain]) {
        for (const [method, path] of [['GET', '/admin/dead-letters'], ['GET', '/admin/dead-letters/x'], ['POST', '/admin/dead-letters/x/retry'], ['DELETE', '/admin/dead-letters/x']] as const) {
          const res = await stack.request(path, { method, headers: as(secret) });
          expect(res.status, `${method} ${path}`).to.equal(403);
          expect(res.body.error.code).to.equal('forbidden');
        }
      }
      const anonymous = await get('/admin/dead-letters');
      expect(anonymous.status).to.equal(401);
      expect(anonymous.body.error.code).to.equal('unauthorized');
    });

    it('an admin key writes like any other key', async () => {
      expect((await stack.post('/feedback-record', recordBody(), as(storedAdmin))).status).to.equal(200);
    });
  });

  describe('the keys CLI as a process', () => {
    it('create prints the secret once, list never prints it, revoke takes the key out of list', async function () {
      this.timeout(60_000);
      const created = await runCli('scripts/keys-main.ts', ['create', '--name', 'cli-key', '--datasets', 'ds_x,ds_y', '--read', '--admin'], stack.config, API_KEYS);
      expect(created.code, created.stderr).to.equal(0);
      const secret = secretOf(created.stdout.split('\n'));
      expect(created.stdout.split(secret)).to.have.length(2);
      expect(created.stderr).to.not.include(secret);

      const listed = await runCli('scripts/keys-main.ts', ['list'], stack.config, API_KEYS);
      expect(listed.code, listed.stderr).to.equal(0);
      expect(listed.stdout).to.match(/^cli-key\tds_x,ds_y\twrite\+read\+admin\t/m);
      expect((await admin.list()).find((k) => k.name === 'cli-key')).to.include({ read: true, admin: true });
      expect(listed.stdout).to.not.include(secret);
      expect(listed.stdout).to.not.include(createHash('sha256').update(secret).digest('hex'));

      const revoked = await runCli('scripts/keys-main.ts', ['revoke', 'cli-key'], stack.config, API_KEYS);
      expect(revoked.code, revoked.stderr).to.equal(0);
      expect((await admin.list()).map((k) => k.name)).to.not.include('cli-key');
    });
  });
});

describe('API keys in MongoDB: MongoDB unreachable', () => {
  it('the API starts with the API_KEYS keys alone when MongoDB is down at start-up', async () => {
    // Nothing listens on port 9 of 127.0.0.1 (discard); the driver gives up after MONGODB_TIMEOUT_MS.
    const config = testConfig({ MONGODB_URI: 'mongodb://127.0.0.1:9/nowhere', MONGODB_TIMEOUT_MS: '300', API_KEYS_REFRESH_MS: '100' });
    const api = await startApi(config, silentLogger);
    try {
      const res = await fetch(`http://127.0.0.1:${api.port}/feedback-record`, { method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${TEST_KEY.secret}` }, body: JSON.stringify(recordBody()) });
      expect(res.status).to.equal(200);
      // Any other token may be a stored key that could not be loaded: a retryable 503, not a final 401.
      const unknown = await fetch(`http://127.0.0.1:${api.port}/feedback-record`, { method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: 'Bearer maybe-a-stored-key' }, body: JSON.stringify(recordBody()) });
      expect(unknown.status).to.equal(503);
      expect(unknown.headers.get('retry-after')).to.match(/^\d+$/);
      expect(((await unknown.json()) as { error: { code: string } }).error.code).to.equal('store_unavailable');
    } finally {
      await api.close();
    }
  });

  it('admin endpoints answer 503 store_unavailable with Retry-After, not 500, while MongoDB does not answer', async () => {
    const config = testConfig({ MONGODB_URI: 'mongodb://127.0.0.1:9/nowhere', MONGODB_TIMEOUT_MS: '300', ADMIN_API_KEY_NAMES: TEST_KEY.name });
    const api = await startApi(config, silentLogger);
    try {
      const headers = { 'Content-Type': 'application/json', Authorization: `Bearer ${TEST_KEY.secret}` };
      for (const [method, path, body] of [
        ['GET', '/admin/webhooks', undefined],
        ['POST', '/admin/webhooks', { url: 'https://example.com/hook', events: ['record.created'] }],
        ['GET', '/admin/webhooks/wh_x/deliveries', undefined],
        ['DELETE', '/admin/webhooks/wh_x', undefined],
        ['GET', '/datasets', undefined],
      ] as const) {
        const res = await fetch(`http://127.0.0.1:${api.port}${path}`, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
        expect(res.status, `${method} ${path}`).to.equal(503);
        expect(res.headers.get('retry-after'), `${method} ${path}`).to.match(/^\d+$/);
        expect(((await res.json()) as { error: { code: string } }).error.code, `${method} ${path}`).to.equal('store_unavailable');
      }
    } finally {
      await api.close();
    }
  });

  it('the key store keeps the last loaded keys while MongoDB is down, and reloads when it is back', async () => {
    const ferret = await startFerretDb();
    const mongo = createMongo(loadConfig({ MONGODB_URI: `${ferret.url}/keys`, MONGODB_TIMEOUT_MS: '500' }));
    const store = createKeyStore({ db: mongo.db, refreshMs: 60_000, logger: silentLogger });
    try {
      const storeAdmin = createApiKeyAdmin({ db: mongo.db, reservedNames: [] });
      const { secret } = await storeAdmin.create({ name: 'survivor', datasets: ['ds_a'] });
      await store.start(5_000);
      expect(store.verify(secret)).to.deep.equal({ name: 'survivor', datasets: ['ds_a'], admin: false, read: false });
      await ferret.stop();
      expect(await store.refresh()).to.equal(false);
      expect(store.verify(secret)?.name).to.equal('survivor');
      await ferret.start();
      await storeAdmin.revoke('survivor');
      expect(await store.refresh()).to.equal(true);
      expect(store.verify(secret)).to.equal(undefined);
    } finally {
      await store.close();
      await mongo.close();
      await ferret.destroy();
    }
  });
});

async function expectAdminError(promise: Promise<unknown>, message: RegExp): Promise<void> {
  try {
    await promise;
  } catch (err) {
    expect(err).to.be.instanceOf(ApiKeyAdminError);
    expect((err as Error).message).to.match(message);
    return;
  }
  expect.fail(`expected an ApiKeyAdminError matching ${message}`);
}
