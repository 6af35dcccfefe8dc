import { Validator } from '@seriousme/openapi-schema-validator';
import { expect } from 'chai';
import { insertSeed, seedDocs } from '../helpers/read-seed.js';
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { ErrorCode } from '../../shared/errors.js';
import { testConfig, TEST_KEY } from '../helpers/env.js';
import { deadLetters } from '../helpers/stack.js';
import { recordBody, startStack, type HttpResult, type Stack } from '../helpers/stack.js';

/*
 * The OpenAPI document served by the real API: valid OpenAPI 3.1 (checked by a real validator),
 * documents every error code, and its request schemas give the same verdict as the API itself
 * on bodies whose rules JSON Schema can express.
 */

type Json = Record<string, any>;

interface CompiledSchema {
  (data: unknown): boolean;
  errors?: unknown;
}
interface JsonSchemaValidator {
  compile(schema: object): CompiledSchema;
}

/**
 * Ajv 8 (JSON Schema 2020-12, OpenAPI 3.1's dialect) is installed as a dependency of the OpenAPI
 * validator; the top-level `ajv` is eslint's Ajv 6, which knows only draft-07.
 */
function createJsonSchemaValidator(): JsonSchemaValidator {
  const require = createRequire(createRequire(import.meta.url).resolve('@seriousme/openapi-schema-validator'));
  const mod = require('ajv/dist/2020') as { default: new (options: object) => JsonSchemaValidator };
  return new mod.default({ allErrors: true, strict: true });
}

function operation(doc: Json, path: string, method: string): Json {
  const op = doc['paths']?.[path]?.[method] as Json | undefined;
  expect(op, `${method.toUpperCase()} ${path} in the document`).to.be.an('object');
  return op!;
}

/** `schema` with every `#/components/schemas/X` reference replaced by that schema, for Ajv. */
function resolved(doc: Json, schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map((item) => resolved(doc, item));
  if (typeof schema !== 'object' || schema === null) return schema;
  const ref = (schema as Json)['$ref'] as string | undefined;
  if (ref !== undefined) return resolved(doc, doc['components']['schemas'][ref.replace('#/components/schemas/', '')]);
  return Object.fromEntries(Object.entries(schema).map(([key, value]) => [key, resolved(doc, value)]));
}

/** The schema of a JSON response or request body, references resolved. */
function schemaOf(doc: Json, holder: Json): Json {
  return resolved(doc, holder['content']['application/json']['schema']) as Json;
}

/** Every `error.code` enum in the responses of `responses`, by status. */
function codesByStatus(responses: Json): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const [status, response] of Object.entries(responses)) {
    const codeEnum = (response as Json)['content']?.['application/json']?.['schema']?.['properties']?.['error']?.['properties']?.['code']?.['enum'] as string[] | undefined;
    if (codeEnum !== undefined) out.set(status, codeEnum);
  }
  return out;
}

describe('GET /openapi.json', () => {
  let stack: Stack;
  let res: HttpResult;
  let doc: Json;
  let ajv: JsonSchemaValidator;

  before(async () => {
    stack = await startStack(testConfig({ ADMIN_API_KEY_NAMES: TEST_KEY.name }), { worker: false });
    // No Authorization header: the document is public.
    res = await stack.request('/openapi.json', { method: 'GET' });
    doc = res.body as Json;
    ajv = createJsonSchemaValidator();
  });
  after(async () => {
    await stack?.close();
  });

  it('answers 200 JSON without authentication, with an X-Request-Id', () => {
    expect(res.status, res.text).to.equal(200);
    expect(res.headers.get('content-type') ?? '').to.match(/^application\/json/);
    expect(res.headers.get('x-request-id')).to.be.a('string').and.not.equal('');
    expect(doc['openapi']).to.equal('3.1.0');
  });

  it('is a valid OpenAPI 3.1 document', async () => {
    const validator = new Validator();
    const result = await validator.validate(structuredClone(doc));
    expect(result.errors, JSON.stringify(result.errors, null, 2)).to.equal(undefined);
    expect(result.valid).to.equal(true);
    expect(validator.version).to.equal('3.1');
    // The validator does reject: the same document with a response lacking its description.
    const broken = structuredClone(doc);
    delete broken['paths']['/healthz']['get']['responses']['200']['description'];
    expect((await new Validator().validate(broken)).valid).to.equal(false);
  });

  it('documents every route the API serves', () => {
    expect(Object.keys(doc['paths'] as Json)).to.include.members(['/feedback-record', '/feedback-response', '/feedback-suggestion', '/feedback-batch', '/healthz', '/readyz', '/metrics', '/openapi.json']);
    for (const path of ['/feedback-record', '/feedback-response', '/feedback-suggestion', '/feedback-batch']) {
      const op = operation(doc, path, 'post');
      // POST /feedback-response also takes a browser feedback token (test/integration/feedback-tokens.test.ts).
      expect(op['security'], path).to.deep.include({ bearerAuth: [] });
      expect(op['parameters'], path).to.deep.include({ $ref: '#/components/parameters/Idempotency-Key' });
      expect(op['responses']['401']['headers'], path).to.have.property('WWW-Authenticate');
      expect(op['responses']['503']['headers'], path).to.have.property('Retry-After');
      expect(op['responses']['429']['headers'], path).to.have.property('Retry-After');
    }
    expect(doc['components']['securitySchemes']['bearerAuth']).to.include({ type: 'http', scheme: 'bearer' });
    expect(doc['components']['responses']['MethodNotAllowed']['headers']).to.have.property('Allow');
    for (const path of ['/healthz', '/readyz', '/metrics', '/openapi.json']) expect(operation(doc, path, 'get')['security'], path).to.deep.equal([]);
  });

  it('documents GET /datasets/{dataset_id}/agreement: its query as the route parses it, its codes, and a real answer matches its schema', async () => {
    const op = operation(doc, '/datasets/{dataset_id}/agreement', 'get');
    const query = (op['parameters'] as Json[]).filter((p) => p['in'] === 'query');
    expect(query.map((p) => [p['name'], p['required']])).to.have.deep.members([['question', true], ['level', false], ['annotators', false], ['records', false], ['include_agents', false]]);
    expect((query.find((p) => p['name'] === 'level')!['schema'] as Json)['enum']).to.deep.equal(['nominal', 'ordinal', 'interval', 'ratio']);
    const codes = codesByStatus(op['responses']);
    expect(codes.get('400')).to.include('validation_failed');
    expect(codes.get('404')).to.include('question_not_found');
    expect(codes.get('403')).to.include('forbidden');
    await stack.db.collection('feedback_responses').insertMany(
      ['A', 'B'].map((user, i) => ({ _id: `rsp-agree-${user}`, feedback_record_id: 'rec-agree', feedback_dataset_id: 'ds_openapi_agree', user_id: user, status: 'submitted', values: { q: i }, seq: 1, api_key: 'seed', request_id: 'seed', created_at: new Date(), updated_at: new Date() })) as never[],
    );
    const res = await stack.request('/datasets/ds_openapi_agree/agreement?question=q', { method: 'GET', headers: { Authorization: `Bearer ${TEST_KEY.secret}` } });
    expect(res.status, res.text).to.equal(200);
    const valid = ajv.compile(schemaOf(doc, op['responses']['200']));
    expect(valid(res.body), JSON.stringify(valid.errors)).to.equal(true);
    expect((await stack.request('/datasets/ds_openapi_agree/agreement?question=q&undocumented=1', { method: 'GET', headers: { Authorization: `Bearer ${TEST_KEY.secret}` } })).status).to.equal(400);
  });

  it('documents the admin endpoints, and a real dead-letter list and entry match their schemas', async () => {
    for (const [path, method] of [['/admin/dead-letters', 'get'], ['/admin/dead-letters/{id}', 'get'], ['/admin/dead-letters/{id}', 'delete'], ['/admin/dead-letters/{id}/retry', 'post'], ['/admin/queues', 'get'], ['/datasets', 'get'], ['/datasets/{id}', 'put'], ['/datasets/{id}', 'get']] as const) {
      const op = operation(doc, path, method);
      expect(op['security'], `${method} ${path}`).to.deep.include({ bearerAuth: [] });
      expect(codesByStatus(op['responses']).get('403'), `${method} ${path}`).to.include('forbidden');
    }
    expect(codesByStatus(operation(doc, '/admin/dead-letters/{id}/retry', 'post')['responses']).get('409')).to.include('dead_letter_not_retryable');
    await deadLetters(stack.db).insertOne({ _id: `${stack.config.queueName}:7:0`, reason: 'store_rejected', error: 'refused by the store', queue: stack.config.queueName, job_id: '7', write_index: 0, request_id: 'req-1', record_id: null, seq: 28672, payload_json: '{"kind":"record"}', failed_at: new Date() } as never);
    const admin = { Authorization: `Bearer ${TEST_KEY.secret}` };
    const list = await stack.request('/admin/dead-letters', { method: 'GET', headers: admin });
    expect(list.status, list.text).to.equal(200);
    const validList = ajv.compile(schemaOf(doc, operation(doc, '/admin/dead-letters', 'get')['responses']['200']));
    expect(validList(list.body), JSON.stringify(validList.errors)).to.equal(true);
    expect((list.body as Json)['items']).to.have.length(1);
    const one = await stack.request(`/admin/dead-letters/${encodeURIComponent(`${stack.config.queueName}:7:0`)}`, { method: 'GET', headers: admin });
    expect(one.status, one.text).to.equal(200);
    const validOne = ajv.compile(schemaOf(doc, operation(doc, '/admin/dead-letters/{id}', 'get')['responses']['200']));
    expect(validOne(one.body), JSON.stringify(validOne.errors)).to.equal(true);
  });

  const listQueries = [
    { path: '/admin/dead-letters', url: '/admin/dead-letters', names: ['reason', 'limit', 'cursor'] },
    { path: '/datasets', url: '/datasets', names: ['limit', 'cursor'] },
    { path: '/datasets/{dataset_id}/records', url: '/datasets/ds_openapi_empty/records', names: ['order', 'limit', 'updated_since', 'responses', 'cursor', 'status', 'user_id', 'response_status', 'metadata.{key}'] },
  ] as const;
  for (const { path, url, names } of listQueries) {
    it(`documents the query of GET ${path} as the route parses it (names, limit bounds and default)`, async () => {
      const admin = { Authorization: `Bearer ${TEST_KEY.secret}` };
      const params = operation(doc, path, 'get')['parameters'] as Json[];
      const query = params.filter((p) => p['in'] === 'query');
      expect(query.map((p) => p['name'])).to.have.members([...names]);
      expect(query.every((p) => p['required'] === false)).to.equal(true);
      const limit = query.find((p) => p['name'] === 'limit')!['schema'] as Json;
      expect(limit).to.include({ type: 'integer', minimum: 1 });
      expect(limit['default']).to.be.within(limit['minimum'] as number, limit['maximum'] as number);
      const status = async (q: string) => (await stack.request(`${url}?${q}`, { method: 'GET', headers: admin })).status;
      expect(await status(`limit=${limit['maximum'] as number}`)).to.equal(200);
      expect(await status(`limit=${limit['minimum'] as number}`)).to.equal(200);
      expect(await status(`limit=${(limit['maximum'] as number) + 1}`)).to.equal(400);
      expect(await status(`limit=${(limit['minimum'] as number) - 1}`)).to.equal(400);
      expect(await status('undocumented=1'), 'a parameter the document does not list').to.equal(400);
    });
  }

  it('documents the dataset endpoints: a real PUT (201, then 200), list, get and schema match their answers', async () => {
    const admin = { Authorization: `Bearer ${TEST_KEY.secret}`, 'Content-Type': 'application/json' };
    // Another id than the example's: the write tests below post to ds_support_bot with no definition.
    const example = JSON.parse(readFileSync(fileURLToPath(new URL('../../docs/datasets/ds_support_bot.json', import.meta.url)), 'utf8')) as Json;
    const definition = { ...example, id: 'ds_openapi_doc' };
    const checkInput = ajv.compile(schemaOf(doc, operation(doc, '/datasets/{id}', 'put')['requestBody'] as Json));
    expect(checkInput(definition), JSON.stringify(checkInput.errors)).to.equal(true);
    const calls = [
      { method: 'PUT', path: '/datasets/{id}', status: 201 },
      { method: 'PUT', path: '/datasets/{id}', status: 200 },
      { method: 'GET', path: '/datasets/{id}', status: 200 },
      { method: 'GET', path: '/datasets', status: 200 },
      { method: 'GET', path: '/datasets/{id}/schema', status: 200 },
    ] as const;
    for (const call of calls) {
      const url = call.path.replace('{id}', String(definition['id']));
      const answer = await stack.request(url, { method: call.method, headers: admin, ...(call.method === 'PUT' ? { body: JSON.stringify(definition) } : {}) });
      expect(answer.status, `${call.method} ${url}: ${answer.text}`).to.equal(call.status);
      const documented = operation(doc, call.path, call.method.toLowerCase())['responses'][String(call.status)] as Json;
      const check = ajv.compile(schemaOf(doc, documented));
      expect(check(answer.body), `${call.method} ${url}: ${answer.text} ${JSON.stringify(check.errors)}`).to.equal(true);
    }
  });

  it('documents the read endpoints, and a real page of records and a real record match their schemas', async () => {
    for (const path of ['/feedback-record/{id}', '/datasets/{dataset_id}/records', '/datasets/{dataset_id}/export']) {
      const op = operation(doc, path, 'get');
      expect(op['security'], path).to.deep.equal([{ bearerAuth: [] }]);
      expect(codesByStatus(op['responses']).get('403'), path).to.include('forbidden');
      expect(codesByStatus(op['responses']).get('503'), path).to.include('store_unavailable');
    }
    expect(codesByStatus(operation(doc, '/feedback-record/{id}', 'get')['responses']).get('404')).to.have.members(['record_not_found', 'record_pending']);
    expect(operation(doc, '/datasets/{dataset_id}/export', 'get')['responses']['200']['content']).to.have.property('application/x-ndjson');
    const [seeded] = seedDocs({ datasetId: 'ds_openapi', count: 1, responseTimesMs: (_, created) => [created, created + 1] });
    await insertSeed(stack.db, [seeded!]);
    const admin = { Authorization: `Bearer ${TEST_KEY.secret}` };
    const page = await stack.request('/datasets/ds_openapi/records', { method: 'GET', headers: admin });
    expect(page.status, page.text).to.equal(200);
    expect((page.body as Json)['items'][0]['responses']).to.have.length(2);
    const validPage = ajv.compile(schemaOf(doc, operation(doc, '/datasets/{dataset_id}/records', 'get')['responses']['200']));
    expect(validPage(page.body), JSON.stringify(validPage.errors)).to.equal(true);
    const validRecord = ajv.compile(doc['components']['schemas']['RecordView'] as Json);
    expect(validRecord({ ...(page.body as Json)['items'][0], api_key: 'x' }), 'an undocumented property').to.equal(true);
    expect(validRecord({ ...(page.body as Json)['items'][0], created_at: 7 }), 'a wrong type').to.equal(false);
  });

  it('lists every ErrorCode, each under the response of its HTTP status', () => {
    const listed = (doc['components']['schemas']['ErrorCode']['oneOf'] as Json[]).map((o) => o['const'] as string);
    expect(listed).to.have.members(Object.keys(ErrorCode));
    const perStatus = codesByStatus(doc['components']['responses'] as Json);
    for (const [code, { status }] of Object.entries(ErrorCode)) {
      expect(perStatus.get(`Error${status}`) ?? [], `${code} under components.responses.Error${status}`).to.include(code);
    }
  });

  it('gives each write operation the codes it can answer with, by status', () => {
    const record = codesByStatus(operation(doc, '/feedback-record', 'post')['responses'] as Json);
    const response = codesByStatus(operation(doc, '/feedback-response', 'post')['responses'] as Json);
    expect(record.get('400')).to.include.members(['invalid_json', 'validation_failed', 'invalid_header']);
    expect(record.get('401')).to.have.members(['unauthorized', 'invalid_api_key']);
    expect(record.get('503'), 'store_unavailable: the stored keys not loaded yet').to.have.members(['queue_unavailable', 'overloaded', 'store_unavailable']);
    expect(record.get('404'), 'a record is never looked up by POST /feedback-record').to.have.members(['dataset_not_found']);
    expect(response.get('404')).to.have.members(['record_not_found', 'dataset_not_found']);
    for (const ops of [record, response]) {
      for (const [status, codes] of ops) {
        for (const code of codes) expect(String(ErrorCode[code as ErrorCode].status), `${code} documented under ${status}`).to.equal(status);
      }
    }
  });

  describe('request schemas agree with the API', () => {
    let recordId: string;
    before(async () => {
      const created = await stack.post('/feedback-record', recordBody());
      expect(created.status, created.text).to.equal(200);
      recordId = created.body.feedback_record_id as string;
    });

    const cases: readonly { path: '/feedback-record' | '/feedback-response' | '/feedback-suggestion'; name: string; body: (recordId: string) => unknown; valid: boolean }[] = [
      { path: '/feedback-record', name: 'the test helper body', body: () => recordBody(), valid: true },
      {
        path: '/feedback-record',
        name: 'the SPEC example',
        body: () => ({
          record: { feedback_dataset_id: 'ds_support_bot', field_to_value: { prompt: 'How do I reset my password?', answer: 'Go to Settings…' }, external_id: 'conv-8812:turn-3', metadata: { model: 'gpt-x', locale: 'en' } },
          response: { values: { helpful: 1, ranking: ['answer', 'prompt'] }, status: 'submitted', user_id: 'end-user-77' },
        }),
        valid: true,
      },
      { path: '/feedback-record', name: 'a discarded response with empty values', body: () => recordBody({ response: { values: {}, status: 'discarded' } }), valid: true },
      { path: '/feedback-record', name: 'an unknown top-level property', body: () => ({ ...recordBody(), extra: 1 }), valid: false },
      { path: '/feedback-record', name: 'an unknown property in record', body: () => recordBody({ record: { extra: 1 } }), valid: false },
      { path: '/feedback-record', name: 'an unknown property in response', body: () => recordBody({ response: { extra: 1 } }), valid: false },
      { path: '/feedback-record', name: 'no record', body: () => ({ response: { values: { helpful: 1 } } }), valid: false },
      { path: '/feedback-record', name: 'a bad status', body: () => recordBody({ response: { status: 'final' } }), valid: false },
      { path: '/feedback-record', name: 'an empty field_to_value', body: () => recordBody({ record: { field_to_value: {} } }), valid: false },
      { path: '/feedback-record', name: 'a dataset id over 256 characters', body: () => recordBody({ record: { feedback_dataset_id: 'd'.repeat(257) } }), valid: false },
      { path: '/feedback-record', name: 'a list as values', body: () => recordBody({ response: { values: [1] } }), valid: false },
      { path: '/feedback-response', name: 'the SPEC example', body: (id) => ({ feedback_record_id: id, response: { status: 'draft', values: { helpful: 3 }, user_id: 'annotator-4' } }), valid: true },
      { path: '/feedback-response', name: 'an unknown top-level property', body: (id) => ({ feedback_record_id: id, response: { status: 'draft', values: { helpful: 3 } }, extra: true }), valid: false },
      { path: '/feedback-response', name: 'an unknown property in response', body: (id) => ({ feedback_record_id: id, response: { status: 'draft', values: { helpful: 3 }, score: 1 } }), valid: false },
      { path: '/feedback-response', name: 'no status', body: (id) => ({ feedback_record_id: id, response: { values: { helpful: 3 } } }), valid: false },
      { path: '/feedback-response', name: 'an empty feedback_record_id', body: () => ({ feedback_record_id: '', response: { status: 'draft', values: { helpful: 3 } } }), valid: false },
      { path: '/feedback-record', name: 'suggestions beside the response', body: () => ({ ...recordBody(), suggestions: [{ question: 'helpful', value: 1, score: 0.5, agent: 'm' }] }), valid: true },
      { path: '/feedback-record', name: 'a suggestion with a score over 1', body: () => ({ ...recordBody(), suggestions: [{ question: 'helpful', value: 1, score: 2 }] }), valid: false },
      { path: '/feedback-suggestion', name: 'a suggestion with every field', body: (id) => ({ feedback_record_id: id, suggestion: { question: 'helpful', value: { any: ['json'] }, score: 0, agent: 'judge-v3' } }), valid: true },
      { path: '/feedback-suggestion', name: 'an unknown property in suggestion', body: (id) => ({ feedback_record_id: id, suggestion: { question: 'helpful', value: 1, extra: 1 } }), valid: false },
      { path: '/feedback-suggestion', name: 'no question', body: (id) => ({ feedback_record_id: id, suggestion: { value: 1 } }), valid: false },
    ];

    for (const c of cases) {
      it(`POST ${c.path}: ${c.name} is ${c.valid ? 'accepted' : 'rejected'} by both`, async () => {
        const op = operation(doc, c.path, 'post');
        const check = ajv.compile(schemaOf(doc, op['requestBody'] as Json));
        const body = c.body(recordId);
        expect(check(body), JSON.stringify(check.errors)).to.equal(c.valid);
        const answer = await stack.post(c.path, body);
        expect(answer.status, answer.text).to.equal(c.valid ? 200 : 400);
        // The API's answer matches the document's response schema for that status.
        const checkAnswer = ajv.compile(schemaOf(doc, op['responses'][String(answer.status)] as Json));
        expect(checkAnswer(answer.body), `${answer.text} ${JSON.stringify(checkAnswer.errors)}`).to.equal(true);
      });
    }
  });

  it('documents POST /feedback-batch: its body accepts what the API accepts, and a real 207 with good and bad items matches BatchResponse', async () => {
    const op = operation(doc, '/feedback-batch', 'post');
    expect(op['responses']).to.have.property('207');
    expect(op['responses']).to.not.have.property('200');
    const checkBody = ajv.compile(schemaOf(doc, op['requestBody'] as Json));
    const body = { items: [recordBody(), { record_index: 0, response: { status: 'draft', values: { a: 1 } } }, recordBody({ response: { status: 'final' } })] };
    expect(checkBody(body), JSON.stringify(checkBody.errors)).to.equal(false);
    expect(checkBody({ items: body.items.slice(0, 2) }), JSON.stringify(checkBody.errors)).to.equal(true);
    expect(checkBody({ items: [] })).to.equal(false);
    const answer = await stack.post('/feedback-batch', body);
    expect(answer.status, answer.text).to.equal(207);
    expect(answer.body.rejected).to.equal(1);
    const checkAnswer = ajv.compile(schemaOf(doc, op['responses']['207'] as Json));
    expect(checkAnswer(answer.body), `${answer.text} ${JSON.stringify(checkAnswer.errors)}`).to.equal(true);
  });

  it('describes a 401 the way the API answers it', async () => {
    const answer = await stack.post('/feedback-record', recordBody(), { Authorization: 'Bearer not-a-key' });
    expect(answer.status).to.equal(401);
    const documented = operation(doc, '/feedback-record', 'post')['responses']['401'] as Json;
    const check = ajv.compile(schemaOf(doc, documented));
    expect(check(answer.body), JSON.stringify(check.errors)).to.equal(true);
    expect(answer.headers.get('www-authenticate')).to.be.a('string');
  });
});
