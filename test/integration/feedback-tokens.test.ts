import { Validator } from '@seriousme/openapi-schema-validator';
import { expect } from 'chai';
import { createFeedbackTokens } from '../../api/feedback-tokens.js';
import { createApiKeyAdmin } from '../../shared/api-keys.js';
import { OTHER_KEY, testConfig, TEST_KEY } from '../helpers/env.js';
import { eventually, recordBody, responses, startStack, type HttpResult, type Stack } from '../helpers/stack.js';

const ALLOWED = 'http://chat.allowed.example:8080';
const DISALLOWED = 'http://evil.example';
/** An API key that happens to have a token's shape: still a key. */
const JWS_SHAPED_KEY = 'eyJhbGciOiJIUzI1NiJ9.eyJrZXkiOnRydWV9.c2VjcmV0LWtleQ';
const bearer = (secret: string) => ({ Authorization: `Bearer ${secret}` });
const answer = (values: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({ status: 'submitted', values, ...extra });

function expectError(res: HttpResult, status: number, code: string): void {
  expect(res.status, res.text).to.equal(status);
  expect(res.body?.error?.code, res.text).to.equal(code);
}

describe('POST /feedback-tokens and feedback tokens on POST /feedback-response', function () {
  this.timeout(60_000);
  let stack: Stack;
  let recordId: string;
  let otherRecordId: string;
  before(async () => {
    stack = await startStack(testConfig({ CORS_ORIGINS: ALLOWED, API_KEYS_REFRESH_MS: '100', API_KEYS: `${TEST_KEY.name}:${TEST_KEY.secret},${OTHER_KEY.name}:${OTHER_KEY.secret},jws-shaped:${JWS_SHAPED_KEY}` }));
    const created = await Promise.all([stack.post('/feedback-record', recordBody()), stack.post('/feedback-record', recordBody())]);
    for (const res of created) expect(res.status, res.text).to.equal(200);
    [recordId, otherRecordId] = created.map((res) => res.body.feedback_record_id as string) as [string, string];
  });
  after(async () => {
    await stack?.close();
  });

  /** A token minted through the endpoint by `secret` (the test key by default). */
  async function mint(scope: Record<string, unknown>, secret: string = TEST_KEY.secret): Promise<string> {
    const res = await stack.post('/feedback-tokens', scope, bearer(secret));
    expect(res.status, res.text).to.equal(200);
    return res.body.token as string;
  }
  const respond = (token: string, body: unknown, headers: Record<string, string> = {}) => stack.post('/feedback-response', body, { ...bearer(token), ...headers });
  /** Tokens the service's own secrets signed, at another time: an expired token without waiting for one to expire. */
  const tokensAt = (nowMs: number) => createFeedbackTokens({ secrets: stack.config.idSigningSecrets, defaultTtlSeconds: 60, maxTtlSeconds: stack.config.feedbackTokenMaxTtlSeconds, now: () => nowMs });

  describe('minting', () => {
    it('answers a token scoped to the record and annotator, with its expiry (FEEDBACK_TOKEN_TTL_SECONDS by default), never cached', async () => {
      const before = Math.floor(Date.now() / 1000);
      const res = await stack.post('/feedback-tokens', { feedback_record_id: recordId, user_id: 'end-user-77' });
      const after = Math.ceil(Date.now() / 1000);
      expect(res.status, res.text).to.equal(200);
      expect(res.headers.get('cache-control')).to.equal('no-store');
      expect(res.body).to.include({ token_type: 'Bearer', expires_in_seconds: 900, feedback_record_id: recordId, user_id: 'end-user-77', questions: null });
      expect(res.body.token).to.match(/^eyJ[\w-]*\.[\w-]+\.[\w-]+$/);
      const expiresAt = Date.parse(res.body.expires_at as string) / 1000;
      expect(expiresAt).to.be.within(before + 900, after + 900);
    });

    it('takes questions and a lifetime up to FEEDBACK_TOKEN_MAX_TTL_SECONDS; above it 400 validation_failed', async () => {
      const res = await stack.post('/feedback-tokens', { feedback_record_id: recordId, user_id: 'u', questions: ['rating', 'comment', 'rating'], expires_in_seconds: 3600 });
      expect(res.status, res.text).to.equal(200);
      expect(res.body).to.include({ expires_in_seconds: 3600 });
      expect(res.body.questions).to.deep.equal(['rating', 'comment']);
      const tooLong = await stack.post('/feedback-tokens', { feedback_record_id: recordId, user_id: 'u', expires_in_seconds: 3601 });
      expectError(tooLong, 400, 'validation_failed');
      expect(tooLong.body.error.details).to.deep.equal([{ path: 'expires_in_seconds', message: 'must be at most 3600 (FEEDBACK_TOKEN_MAX_TTL_SECONDS)' }]);
    });

    it('400 validation_failed on a bad body, listing each problem', async () => {
      const res = await stack.post('/feedback-tokens', { feedback_record_id: recordId, questions: ['$set', 'a.b'], expires_in_seconds: 1.5, extra: true });
      expectError(res, 400, 'validation_failed');
      expect((res.body.error.details as { path: string }[]).map((d) => d.path)).to.have.members(['user_id', 'questions[0]', 'questions[1]', 'expires_in_seconds', 'extra']);
      expectError(await stack.post('/feedback-tokens', { feedback_record_id: recordId, user_id: 'u', questions: [] }), 400, 'validation_failed');
    });

    it('404 record_not_found for a record this service never minted', async () => {
      expectError(await stack.post('/feedback-tokens', { feedback_record_id: 'rec_nope', user_id: 'u' }), 404, 'record_not_found');
    });

    it('a dataset-scoped key mints only for records of its datasets (403 forbidden otherwise)', async () => {
      const admin = createApiKeyAdmin({ db: stack.db, reservedNames: stack.config.apiKeys.map((k) => k.name) });
      const scoped = (await admin.create({ name: 'scoped-minter', datasets: ['ds_a'] })).secret;
      const own = await eventually(async () => {
        const res = await stack.post('/feedback-record', recordBody({ record: { feedback_dataset_id: 'ds_a' } }), bearer(scoped));
        return res.status === 200 ? (res.body.feedback_record_id as string) : undefined;
      }, 10_000, 'the stored key loaded');
      expect((await stack.post('/feedback-tokens', { feedback_record_id: own, user_id: 'u' }, bearer(scoped))).status).to.equal(200);
      // recordId belongs to ds_test.
      expectError(await stack.post('/feedback-tokens', { feedback_record_id: recordId, user_id: 'u' }, bearer(scoped)), 403, 'forbidden');
    });

    it('needs an API key: no key 401 unauthorized, a feedback token 401 invalid_api_key', async () => {
      expectError(await stack.post('/feedback-tokens', { feedback_record_id: recordId, user_id: 'u' }, { Authorization: '' }), 401, 'unauthorized');
      const token = await mint({ feedback_record_id: recordId, user_id: 'u' });
      expectError(await stack.post('/feedback-tokens', { feedback_record_id: recordId, user_id: 'u' }, bearer(token)), 401, 'invalid_api_key');
    });
  });

  describe('writing with a token', () => {
    it('stores the response under the token\'s annotator, attributed to the minting key', async () => {
      const token = await mint({ feedback_record_id: recordId, user_id: 'end-user-77' }, OTHER_KEY.secret);
      const res = await respond(token, { feedback_record_id: recordId, response: answer({ rating: 'up' }) });
      expect(res.status, res.text).to.equal(200);
      const stored = await eventually(() => responses(stack.db).findOne({ _id: res.body.feedback_response_id as string }).then((d) => d ?? undefined), 15_000, 'the response stored');
      expect(stored).to.include({ feedback_record_id: recordId, user_id: 'end-user-77', status: 'submitted', api_key: OTHER_KEY.name });
      expect(stored['values']).to.deep.equal({ rating: 'up' });
      // The same annotator named explicitly is within scope.
      expect((await respond(token, { feedback_record_id: recordId, response: answer({ rating: 'down' }, { user_id: 'end-user-77' }) })).status).to.equal(200);
    });

    it('an API key is tried first: a key shaped like a token is still a key, on every route', async () => {
      const record = await stack.post('/feedback-record', recordBody(), bearer(JWS_SHAPED_KEY));
      expect(record.status, record.text).to.equal(200);
      const res = await stack.post('/feedback-response', { feedback_record_id: recordId, response: answer({ rating: 'up' }, { user_id: 'any-annotator' }) }, bearer(JWS_SHAPED_KEY));
      expect(res.status, res.text).to.equal(200);
    });

    it('403 token_out_of_scope for another record', async () => {
      const token = await mint({ feedback_record_id: recordId, user_id: 'u1' });
      expectError(await respond(token, { feedback_record_id: otherRecordId, response: answer({ rating: 'up' }) }), 403, 'token_out_of_scope');
    });

    it('403 token_out_of_scope for another user_id', async () => {
      const token = await mint({ feedback_record_id: recordId, user_id: 'u1' });
      const res = await respond(token, { feedback_record_id: recordId, response: answer({ rating: 'up' }, { user_id: 'u2' }) });
      expectError(res, 403, 'token_out_of_scope');
      expect(res.body.error.message).to.include('"u1"');
    });

    it('403 token_out_of_scope for a question outside the token\'s questions; its own questions pass', async () => {
      const token = await mint({ feedback_record_id: recordId, user_id: 'u3', questions: ['rating', 'comment'] });
      const res = await respond(token, { feedback_record_id: recordId, response: answer({ rating: 'up', score: 10 }) });
      expectError(res, 403, 'token_out_of_scope');
      expect(res.body.error.message).to.include('"score"');
      expect((await respond(token, { feedback_record_id: recordId, response: answer({ rating: 'up', comment: 'ok' }) })).status).to.equal(200);
      expect((await respond(token, { feedback_record_id: recordId, response: { status: 'discarded', values: {} } })).status).to.equal(200);
    });

    it('401 token_expired once the token has expired, with WWW-Authenticate', async () => {
      const { token } = await tokensAt(Date.now() - 2 * 3600_000).mint({ recordId, userId: 'u4', questions: null, issuedBy: TEST_KEY.name }, 60);
      const res = await respond(token, { feedback_record_id: recordId, response: answer({ rating: 'up' }) });
      expectError(res, 401, 'token_expired');
      expect(res.headers.get('www-authenticate')).to.equal('Bearer error="invalid_token", error_description="token expired"');
      // The same scope, unexpired, is accepted: the refusal is the expiry's.
      const { token: fresh } = await tokensAt(Date.now()).mint({ recordId, userId: 'u4', questions: null, issuedBy: TEST_KEY.name }, 60);
      expect((await respond(fresh, { feedback_record_id: recordId, response: answer({ rating: 'up' }) })).status).to.equal(200);
    });

    it('401 invalid_token for an altered token or one signed with another secret', async () => {
      const token = await mint({ feedback_record_id: recordId, user_id: 'u5' });
      const [h, p, s] = token.split('.') as [string, string, string];
      const claims = JSON.parse(Buffer.from(p, 'base64url').toString('utf8')) as Record<string, unknown>;
      const altered = `${h}.${Buffer.from(JSON.stringify({ ...claims, rec: otherRecordId })).toString('base64url')}.${s}`;
      const res = await respond(altered, { feedback_record_id: otherRecordId, response: answer({ rating: 'up' }) });
      expectError(res, 401, 'invalid_token');
      expect(res.headers.get('www-authenticate')).to.equal('Bearer error="invalid_token"');
      const foreign = await createFeedbackTokens({ secrets: ['some-other-deployment-secret-0'], defaultTtlSeconds: 60, maxTtlSeconds: 60 }).mint({ recordId, userId: 'u5', questions: null, issuedBy: TEST_KEY.name });
      expectError(await respond(foreign.token, { feedback_record_id: recordId, response: answer({ rating: 'up' }) }), 401, 'invalid_token');
    });

    it('is refused by every other endpoint: POST /feedback-record, admin endpoints, the dashboard', async () => {
      const token = await mint({ feedback_record_id: recordId, user_id: 'u6' });
      const record = await stack.post('/feedback-record', recordBody(), bearer(token));
      expectError(record, 401, 'invalid_api_key');
      expect(record.body.error.message).to.include('POST /feedback-response only');
      expectError(await stack.request('/admin/dead-letters', { headers: bearer(token) }), 401, 'invalid_api_key');
      expectError(await stack.request('/admin/queues', { headers: bearer(token) }), 401, 'invalid_api_key');
    });

    it('counts a token\'s writes against its minting key\'s own rate limit (one budget)', async () => {
      const admin = createApiKeyAdmin({ db: stack.db, reservedNames: stack.config.apiKeys.map((k) => k.name) });
      const limited = (await admin.create({ name: 'limited-minter', rateLimitPerMinute: 3 })).secret;
      // Refused requests (401 while the key loads) are not counted: the limit runs after authentication.
      const token = await eventually(async () => {
        const res = await stack.post('/feedback-tokens', { feedback_record_id: recordId, user_id: 'rl-user' }, bearer(limited));
        return res.status === 200 ? (res.body.token as string) : undefined;
      }, 10_000, 'the stored key loaded');
      const body = { feedback_record_id: recordId, response: answer({ rating: 'up' }) };
      const byToken = await respond(token, body);
      expect(byToken.status, byToken.text).to.equal(200);
      expect(byToken.headers.get('ratelimit-limit')).to.equal('3');
      expect((await stack.post('/feedback-record', recordBody(), bearer(limited))).status).to.equal(200);
      const over = await respond(token, body);
      expectError(over, 429, 'rate_limited');
    });

    it('keeps Idempotency-Keys per token: two annotators sending the same key and body each get their own write', async () => {
      const [a, b] = await Promise.all([mint({ feedback_record_id: recordId, user_id: 'idem-a' }), mint({ feedback_record_id: recordId, user_id: 'idem-b' })]);
      const body = { feedback_record_id: recordId, response: answer({ rating: 'up' }) };
      const first = await respond(a, body, { 'Idempotency-Key': 'click-1' });
      const second = await respond(b, body, { 'Idempotency-Key': 'click-1' });
      expect([first.status, second.status]).to.deep.equal([200, 200]);
      expect(second.headers.get('idempotent-replayed')).to.equal(null);
      expect(second.body.feedback_response_id).to.not.equal(first.body.feedback_response_id);
      // A retry by the same token replays.
      const retry = await respond(a, body, { 'Idempotency-Key': 'click-1' });
      expect(retry.headers.get('idempotent-replayed')).to.equal('true');
      expect(retry.body).to.deep.equal(first.body);
    });
  });

  describe('GET /openapi.json', () => {
    type Json = Record<string, any>;
    const codes = (responses: Json, status: string) => ((responses[status]?.content?.['application/json']?.schema?.properties?.error?.properties?.code?.enum ?? []) as string[]);

    it('documents POST /feedback-tokens and the token codes and scheme of POST /feedback-response, in a valid document', async () => {
      const doc = (await stack.request('/openapi.json', {})).body as Json;
      const validation = await new Validator().validate(structuredClone(doc));
      expect(validation.valid, JSON.stringify(validation.errors)).to.equal(true);
      const mint = doc['paths']['/feedback-tokens']['post'] as Json;
      expect(mint['requestBody']['content']['application/json']['schema']).to.deep.equal({ $ref: '#/components/schemas/FeedbackTokenBody' });
      expect(codes(mint['responses'], '404')).to.deep.equal(['record_not_found']);
      expect(codes(mint['responses'], '403')).to.deep.equal(['forbidden']);
      const respond = doc['paths']['/feedback-response']['post'] as Json;
      expect(respond['security']).to.deep.equal([{ bearerAuth: [] }, { feedbackToken: [] }]);
      expect(codes(respond['responses'], '401')).to.have.members(['unauthorized', 'invalid_api_key', 'token_expired', 'invalid_token']);
      expect(codes(respond['responses'], '403')).to.have.members(['forbidden', 'token_out_of_scope']);
      expect(doc['components']['schemas']['FeedbackTokenResponse']['required']).to.have.members(['token', 'token_type', 'expires_at', 'expires_in_seconds', 'feedback_record_id', 'user_id', 'questions']);
    });
  });

  describe('CORS (CORS_ORIGINS, POST /feedback-response only)', () => {
    const preflight = (path: string, origin: string) =>
      stack.request(path, { method: 'OPTIONS', headers: { Origin: origin, 'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': 'authorization,content-type,idempotency-key' } });

    it('answers a preflight from a configured origin: 204 with the method and headers a page sends', async () => {
      const res = await preflight('/feedback-response', ALLOWED);
      expect(res.status).to.equal(204);
      expect(res.headers.get('access-control-allow-origin')).to.equal(ALLOWED);
      expect(res.headers.get('access-control-allow-methods')).to.equal('POST');
      expect(res.headers.get('access-control-allow-headers')?.split(',')).to.include.members(['Authorization', 'Content-Type', 'Idempotency-Key']);
      expect(res.headers.get('access-control-allow-credentials')).to.equal(null);
      expect(res.headers.get('vary')).to.match(/Origin/);
    });

    it('refuses a preflight from another origin: no Access-Control-Allow-Origin (the OPTIONS answer of any path, Allow: POST)', async () => {
      const res = await preflight('/feedback-response', DISALLOWED);
      expect(res.headers.get('access-control-allow-origin')).to.equal(null);
      expect(res.status).to.equal(200);
      expect(res.headers.get('allow')).to.equal('POST');
    });

    it('answers CORS on no other route, even for a configured origin', async () => {
      for (const path of ['/feedback-record', '/feedback-tokens', '/admin/dead-letters']) {
        const res = await preflight(path, ALLOWED);
        expect(res.headers.get('access-control-allow-origin'), path).to.equal(null);
      }
    });

    it('lets the page read both a 200 and an error (401 token_expired), with X-Request-Id exposed', async () => {
      const token = await mint({ feedback_record_id: recordId, user_id: 'cors-user' });
      const ok = await respond(token, { feedback_record_id: recordId, response: answer({ rating: 'up' }) }, { Origin: ALLOWED });
      expect(ok.status).to.equal(200);
      expect(ok.headers.get('access-control-allow-origin')).to.equal(ALLOWED);
      expect(ok.headers.get('access-control-expose-headers')?.split(',')).to.include('X-Request-Id');
      const { token: expired } = await tokensAt(Date.now() - 2 * 3600_000).mint({ recordId, userId: 'cors-user', questions: null, issuedBy: TEST_KEY.name }, 60);
      const refused = await respond(expired, { feedback_record_id: recordId, response: answer({ rating: 'up' }) }, { Origin: ALLOWED });
      expectError(refused, 401, 'token_expired');
      expect(refused.headers.get('access-control-allow-origin')).to.equal(ALLOWED);
      const notAllowed = await respond(token, { feedback_record_id: recordId, response: answer({ rating: 'up' }) }, { Origin: DISALLOWED });
      expect(notAllowed.headers.get('access-control-allow-origin')).to.equal(null);
    });

    it('keeps 405 method_not_allowed with Allow: POST for other methods on the browser route', async () => {
      const res = await stack.request('/feedback-response', { method: 'GET', headers: { Origin: ALLOWED } });
      expectError(res, 405, 'method_not_allowed');
      expect(res.headers.get('allow')).to.equal('POST');
      expect(res.headers.get('access-control-allow-origin')).to.equal(ALLOWED);
    });
  });
});

describe('CORS without CORS_ORIGINS', function () {
  this.timeout(30_000);
  let stack: Stack;
  before(async () => {
    stack = await startStack(testConfig(), { worker: false });
  });
  after(async () => {
    await stack?.close();
  });

  it('answers no origin at all (the default)', async () => {
    const res = await stack.request('/feedback-response', { method: 'OPTIONS', headers: { Origin: ALLOWED, 'Access-Control-Request-Method': 'POST' } });
    expect(res.headers.get('access-control-allow-origin')).to.equal(null);
    expect(res.headers.get('allow')).to.equal('POST');
  });
});
