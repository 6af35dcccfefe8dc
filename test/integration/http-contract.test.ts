import { expect } from 'chai';
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { deflateSync, gzipSync } from 'node:zlib';
import { createIdMinter } from '../../shared/ids.js';
import { OTHER_KEY, testConfig, TEST_KEY } from '../helpers/env.js';
import { eventually, recordBody, records, responses, startStack, type HttpResult, type Stack } from '../helpers/stack.js';

/*
 * The HTTP contract of SPEC.md, through real HTTP against the real API, Redis and FerretDB.
 * Each describe has its own stack (queue + database).
 */

type Json = Record<string, any>;

const AUTH = { Authorization: `Bearer ${TEST_KEY.secret}` } as const;
const JSON_TYPE = { 'Content-Type': 'application/json' } as const;
const STATUS_MESSAGE = 'must be one of draft, submitted, discarded';

/** Any request; `body` is sent as is when it is a string or a Buffer, as JSON otherwise. */
function send(stack: Stack, method: string, path: string, options: { body?: unknown; headers?: Record<string, string> } = {}): Promise<HttpResult> {
  const init: RequestInit = { method, headers: options.headers ?? {} };
  if (options.body !== undefined) {
    init.body = typeof options.body === 'string' || Buffer.isBuffer(options.body) ? (options.body as string | Buffer) : JSON.stringify(options.body);
  }
  return stack.request(path, init);
}

/** A POST whose body goes out chunked (no Content-Length), so the limit cannot be checked up front. */
function postChunked(stack: Stack, path: string, chunks: readonly string[]): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      `${stack.baseUrl}${path}`,
      { method: 'POST', agent: false, headers: { ...AUTH, ...JSON_TYPE, 'Transfer-Encoding': 'chunked' } },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => {
          let body: unknown;
          try {
            body = JSON.parse(text);
          } catch {
            body = undefined;
          }
          resolve({ status: res.statusCode ?? 0, body });
        });
      },
    );
    // The server may answer 413 and close before it has read everything.
    req.on('error', reject);
    for (const c of chunks) req.write(c);
    req.end();
  });
}

/** The one error shape: exactly {error: {code, message, details?}}, details only for validation_failed. */
function expectError(res: HttpResult, status: number, code: string): void {
  expect(res.status, `${res.status} ${res.text}`).to.equal(status);
  expect(res.headers.get('content-type') ?? '').to.match(/^application\/json/);
  expect(res.body, res.text).to.be.an('object').that.has.all.keys('error');
  const err = res.body.error as Json;
  expect(err.code).to.equal(code);
  expect(err.message).to.be.a('string').with.length.greaterThan(0);
  if (code === 'validation_failed') {
    expect(err).to.have.all.keys('code', 'message', 'details');
    expect(err.details).to.be.an('array').with.length.greaterThan(0);
    for (const d of err.details as unknown[]) {
      expect(d).to.be.an('object').that.has.all.keys('path', 'message');
      expect((d as Json).path).to.be.a('string').with.length.greaterThan(0);
      expect((d as Json).message).to.be.a('string').with.length.greaterThan(0);
    }
  } else {
    expect(err).to.have.all.keys('code', 'message');
  }
  expect(res.headers.get('x-request-id') ?? '').to.not.equal('');
}

interface Detail {
  path: string;
  message: string;
}

/** 400 validation_failed; returns the details. */
function validationDetails(res: HttpResult): Detail[] {
  expectError(res, 400, 'validation_failed');
  const details = res.body.error.details as Detail[];
  expect(res.body.error.message, 'the message names the first problem').to.include(details[0]!.path);
  return details;
}

/** The details list exactly these paths (every problem, nothing else). */
function expectPaths(res: HttpResult, paths: readonly string[]): Detail[] {
  const details = validationDetails(res);
  expect(details.map((d) => d.path), JSON.stringify(details)).to.have.members([...paths]);
  return details;
}

/** One test per required field (a dotted path): a valid body without it is 400 with that path alone. */
function requiredFields(path: string, stack: () => Stack, valid: () => Json, fields: readonly string[]): void {
  for (const field of fields) {
    it(`400 validation_failed when ${field} is missing`, async () => {
      const body = valid();
      const keys = field.split('.');
      const last = keys.pop()!;
      delete keys.reduce((o, key) => o[key] as Json, body)[last];
      const details = expectPaths(await stack().post(path, body), [field]);
      expect(details[0]!.message).to.equal('is required');
    });
  }
}

function expectAccepted(res: HttpResult, status = 'submitted'): void {
  expect(res.status, res.text).to.equal(200);
  expect(res.body).to.have.all.keys('feedback_record_id', 'feedback_response_id', 'status');
  expect(res.body.feedback_record_id).to.be.a('string').with.length.greaterThan(0);
  expect(res.body.feedback_response_id).to.be.a('string').with.length.greaterThan(0);
  expect(res.body.status).to.equal(status);
  expect(res.headers.get('x-request-id') ?? '').to.not.equal('');
}

/** An object with an own, enumerable property `key` (works for "__proto__" too). */
function withKey(key: string, value: unknown, base: Json = {}): Json {
  const o: Json = { ...base };
  Object.defineProperty(o, key, { value, enumerable: true, writable: true, configurable: true });
  return o;
}

/** An object `levels` deep: levels = 1 is {leaf: 'x'}, each more level wraps it in {d: …}. */
function nest(levels: number): Json {
  let o: Json = { leaf: 'x' };
  for (let i = 1; i < levels; i++) o = { d: o };
  return o;
}

/** Bad key names and how the path shows them (dotted when an identifier, JSON-quoted otherwise). */
const BAD_KEYS: readonly { name: string; key: string; seg: string }[] = [
  { name: 'starting with $', key: '$where', seg: '["$where"]' },
  { name: 'containing .', key: 'a.b', seg: '["a.b"]' },
  { name: 'containing NUL', key: 'a\u0000b', seg: '["a\\u0000b"]' },
  { name: '__proto__', key: '__proto__', seg: '.__proto__' },
  { name: 'constructor', key: 'constructor', seg: '.constructor' },
  { name: 'prototype', key: 'prototype', seg: '.prototype' },
  { name: 'empty', key: '', seg: '[""]' },
  { name: '201 characters long', key: 'k'.repeat(201), seg: `.${'k'.repeat(201)}` },
];

/** A named JSON object of a body whose keys follow the key-name rules. */
interface KeyedLocation {
  /** Path of the object, e.g. `record.field_to_value`. */
  readonly path: string;
  /** A valid body with `obj` at that place. */
  body(obj: Json): Json;
}

/** Every value kind the service must store unchanged (FerretDB v1: no arrays in arrays, no NUL). */
const VARIETY: Json = {
  text: 'How do I reset my password?',
  unicode: 'Grüße, 你好, Привет, مرحبا',
  emoji: '👍🏽 🚀 👨‍👩‍👧',
  special: 'quote " backslash \\ newline \n tab \t <b>html</b>',
  empty: '',
  int: 42,
  zero: 0,
  negative: -17,
  float: 3.14159,
  negative_float: -0.5,
  beyond_int32: 2147483648,
  max_safe: 9007199254740991,
  min_safe: -9007199254740991,
  huge: 1.7976931348623157e308,
  tiny: 5e-324,
  avogadro: 6.02214076e23,
  yes: true,
  no: false,
  nothing: null,
  list: [1, 'two', 3.5, false, null],
  empty_list: [],
  list_of_objects: [{ a: 1 }, { b: [1, 2], c: { d: 'e' } }, {}],
  nested: { a: { b: { c: { d: [{ e: null, f: 'g' }] } } } },
  empty_object: {},
  'ключ': 'unicode key',
  'emoji🙂key': 1,
  'with space': 'x',
  'a$b': 'dollar inside a key',
  Constructor: 'not the forbidden name',
  [`${'k'.repeat(200)}`]: '200-character key',
};

async function stored<T>(find: () => Promise<T | null>, what: string): Promise<T> {
  return eventually(async () => (await find()) ?? undefined, 15_000, what);
}

/**
 * The "Common rules" rows both endpoints share (except 403, 429, 503), plus X-Request-Id and
 * Idempotency-Key header validation. `valid()` is a body the endpoint accepts.
 */
function commonRules(path: string, getStack: () => Stack, valid: () => Json, acceptedStatus: string): void {
  describe('authentication', () => {
    const unauthorized: readonly [string, Record<string, string>][] = [
      ['no Authorization header', {}],
      ['Basic scheme', { Authorization: `Basic ${Buffer.from(`tester:${TEST_KEY.secret}`).toString('base64')}` }],
      ['Token scheme', { Authorization: `Token ${TEST_KEY.secret}` }],
      ['the key without a scheme', { Authorization: TEST_KEY.secret }],
      ['Bearer without a token', { Authorization: 'Bearer' }],
    ];
    for (const [name, headers] of unauthorized) {
      it(`401 unauthorized with WWW-Authenticate: Bearer (${name})`, async () => {
        const res = await send(getStack(), 'POST', path, { body: valid(), headers: { ...JSON_TYPE, ...headers } });
        expectError(res, 401, 'unauthorized');
        expect(res.headers.get('www-authenticate')).to.equal('Bearer');
      });
    }

    const invalid: readonly [string, string][] = [
      ['an unknown token', 'not-a-known-key-123'],
      ['the key with an extra character', `${TEST_KEY.secret}x`],
      ['a prefix of the key', TEST_KEY.secret.slice(0, -1)],
    ];
    for (const [name, token] of invalid) {
      it(`401 invalid_api_key with WWW-Authenticate: Bearer error="invalid_token" (${name})`, async () => {
        const res = await send(getStack(), 'POST', path, { body: valid(), headers: { ...JSON_TYPE, Authorization: `Bearer ${token}` } });
        expectError(res, 401, 'invalid_api_key');
        expect(res.headers.get('www-authenticate')).to.equal('Bearer error="invalid_token"');
      });
    }

    it('accepts every configured key', async () => {
      const res = await send(getStack(), 'POST', path, { body: valid(), headers: { ...JSON_TYPE, Authorization: `Bearer ${OTHER_KEY.secret}` } });
      expectAccepted(res, acceptedStatus);
    });
  });

  describe('body parsing and media types', () => {
    const malformed: readonly [string, string][] = [
      ['truncated JSON', '{"record": {"feedback_dataset_id": "ds"'],
      ['single quotes', "{'record': 1}"],
      ['a trailing comma', '{"record": {},}'],
      ['bare words', 'hello'],
    ];
    for (const [name, text] of malformed) {
      it(`400 invalid_json for ${name}`, async () => {
        expectError(await send(getStack(), 'POST', path, { body: text, headers: { ...AUTH, ...JSON_TYPE } }), 400, 'invalid_json');
      });
    }

    it('400 invalid_json for an empty body', async () => {
      expectError(await send(getStack(), 'POST', path, { body: '', headers: { ...AUTH, ...JSON_TYPE } }), 400, 'invalid_json');
    });

    it('400 invalid_json for a whitespace-only body', async () => {
      expectError(await send(getStack(), 'POST', path, { body: ' \n ', headers: { ...AUTH, ...JSON_TYPE } }), 400, 'invalid_json');
    });

    it('400 invalid_json for no body and no Content-Type', async () => {
      expectError(await send(getStack(), 'POST', path, { headers: { ...AUTH } }), 400, 'invalid_json');
    });

    it('400 invalid_json for malformed JSON sent without Content-Type', async () => {
      expectError(await send(getStack(), 'POST', path, { body: Buffer.from('{"record":'), headers: { ...AUTH } }), 400, 'invalid_json');
    });

    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'application/xml', 'multipart/form-data; boundary=x']) {
      it(`415 unsupported_media_type for Content-Type ${type} (even with a JSON body)`, async () => {
        const res = await send(getStack(), 'POST', path, { body: JSON.stringify(valid()), headers: { ...AUTH, 'Content-Type': type } });
        expectError(res, 415, 'unsupported_media_type');
      });
    }

    it('accepts a body without Content-Type as JSON', async () => {
      // A Buffer body makes fetch send no Content-Type at all.
      const res = await send(getStack(), 'POST', path, { body: Buffer.from(JSON.stringify(valid())), headers: { ...AUTH } });
      expectAccepted(res, acceptedStatus);
    });

    /** valid() with response.values.note = "a\uFFFDb", as UTF-8 bytes; `bad` swaps the EF BF BD for `bad`. */
    function withReplacementChar(bad?: Buffer): Buffer {
      const body = valid();
      (body['response'] as Json)['values'] = { ...((body['response'] as Json)['values'] as Json), note: 'a\uFFFDb' };
      const bytes = Buffer.from(JSON.stringify(body));
      if (bad === undefined) return bytes;
      const at = bytes.indexOf(Buffer.from('\uFFFD'));
      return Buffer.concat([bytes.subarray(0, at), bad, bytes.subarray(at + 3)]);
    }

    for (const [name, bytes] of [['0xFF', [0xff]], ['a truncated 2-byte sequence', [0xc3]], ['an encoded surrogate', [0xed, 0xa0, 0x80]], ['an overlong /', [0xc0, 0xaf]]] as const) {
      it(`400 invalid_json for invalid UTF-8 (${name}) in a string, not stored as U+FFFD`, async () => {
        const res = await send(getStack(), 'POST', path, { body: withReplacementChar(Buffer.from(bytes)), headers: { ...AUTH, ...JSON_TYPE } });
        expectError(res, 400, 'invalid_json');
        expect(res.body.error.message).to.match(/UTF-8/);
      });
    }

    it('accepts U+FFFD sent as valid UTF-8', async () => {
      expectAccepted(await send(getStack(), 'POST', path, { body: withReplacementChar(), headers: { ...AUTH, ...JSON_TYPE } }), acceptedStatus);
    });

    // SPEC: JSON with any charset is JSON; RFC 8259: the parameter has no effect, the body is UTF-8.
    for (const charset of ['us-ascii', 'latin1', 'utf-16', 'x-no-such-charset']) {
      it(`accepts charset=${charset}, read as UTF-8`, async () => {
        const res = await send(getStack(), 'POST', path, { body: JSON.stringify(valid()), headers: { ...AUTH, 'Content-Type': `application/json; charset=${charset}` } });
        expectAccepted(res, acceptedStatus);
      });
    }

    it('400 invalid_json for a latin1 body that is not UTF-8, saying that JSON is read as UTF-8 (never stored as other text)', async () => {
      const res = await send(getStack(), 'POST', path, { body: withReplacementChar(Buffer.from([0xe9])), headers: { ...AUTH, 'Content-Type': 'application/json; charset=ISO-8859-1' } });
      expectError(res, 400, 'invalid_json');
      expect(res.body.error.message).to.equal('the body is not valid UTF-8 (JSON is read as UTF-8, whatever the charset parameter says: iso-8859-1 was given)');
    });

    for (const type of ['application/json; charset=utf-8', 'application/vnd.foo+json', 'application/json-patch+json', 'Application/JSON']) {
      it(`accepts Content-Type ${type}`, async () => {
        const res = await send(getStack(), 'POST', path, { body: JSON.stringify(valid()), headers: { ...AUTH, 'Content-Type': type } });
        expectAccepted(res, acceptedStatus);
      });
    }
  });

  describe('routing', () => {
    for (const unknown of [`${path}s`, `${path}/extra/more`, '/nope', '/']) {
      it(`404 not_found for POST ${unknown}`, async () => {
        expectError(await send(getStack(), 'POST', unknown, { body: valid(), headers: { ...AUTH, ...JSON_TYPE } }), 404, 'not_found');
      });
    }

    if (path === '/feedback-record') {
      // GET /feedback-record/{id} (the read side) makes this a known path.
      it('405 method_not_allowed with Allow: GET for POST /feedback-record/{id}', async () => {
        const res = await send(getStack(), 'POST', `${path}/extra`, { body: valid(), headers: { ...AUTH, ...JSON_TYPE } });
        expectError(res, 405, 'method_not_allowed');
        expect(res.headers.get('allow')).to.match(/GET/);
      });
    }

    it('404 not_found for GET on an unknown path', async () => {
      expectError(await send(getStack(), 'GET', `${path}-unknown`), 404, 'not_found');
    });

    // The write routes are answered ahead of Koa (api/lean-routes.ts) when the target is the path
    // itself, with or without a query string; an absolute-form target reaches Koa's router, which
    // mounts the same chain. Both must answer alike.
    it(`the same 200 for POST ${path}?query and for its absolute form http://host${path}`, async () => {
      const stack = getStack();
      const viaQuery = await send(stack, 'POST', `${path}?source=test`, { body: valid(), headers: { ...AUTH, ...JSON_TYPE, 'X-Request-Id': 'lean-query' } });
      expectAccepted(viaQuery, acceptedStatus);
      expect(viaQuery.headers.get('x-request-id')).to.equal('lean-query');
      const viaAbsolute = await new Promise<{ status: number; headers: Record<string, unknown>; body: Json }>((resolve, reject) => {
        const url = new URL(stack.baseUrl);
        const req = httpRequest({ host: url.hostname, port: url.port, method: 'POST', path: `${stack.baseUrl}${path}`, agent: false, headers: { ...AUTH, ...JSON_TYPE, 'X-Request-Id': 'koa-absolute' } }, (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (text += c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: JSON.parse(text) as Json }));
        });
        req.on('error', reject);
        req.end(JSON.stringify(valid()));
      });
      expect(viaAbsolute.status, JSON.stringify(viaAbsolute.body)).to.equal(200);
      expect(viaAbsolute.body).to.have.all.keys(Object.keys(viaQuery.body as Json));
      expect(viaAbsolute.headers['x-request-id']).to.equal('koa-absolute');
      expect(viaAbsolute.headers['content-type']).to.equal(viaQuery.headers.get('content-type'));
    });

    for (const method of ['GET', 'PUT', 'DELETE', 'PATCH']) {
      it(`405 method_not_allowed with Allow: POST for ${method} ${path}`, async () => {
        const res = await send(getStack(), method, path, method === 'GET' || method === 'DELETE' ? { headers: { ...AUTH } } : { body: valid(), headers: { ...AUTH, ...JSON_TYPE } });
        expectError(res, 405, 'method_not_allowed');
        expect(res.headers.get('allow')).to.equal('POST');
      });
    }
  });

  describe('X-Request-Id', () => {
    it('echoes a sane caller id on a 200', async () => {
      const res = await send(getStack(), 'POST', path, { body: valid(), headers: { ...AUTH, ...JSON_TYPE, 'X-Request-Id': 'caller-req-42' } });
      expectAccepted(res, acceptedStatus);
      expect(res.headers.get('x-request-id')).to.equal('caller-req-42');
    });

    it('echoes a sane caller id on every kind of error', async () => {
      const s = getStack();
      const id = (n: number) => ({ 'X-Request-Id': `err-${n}` });
      const cases: [number, Promise<HttpResult>][] = [
        [401, send(s, 'POST', path, { body: valid(), headers: { ...JSON_TYPE, ...id(1) } })],
        [401, send(s, 'POST', path, { body: valid(), headers: { ...JSON_TYPE, Authorization: 'Bearer nope-nope', ...id(2) } })],
        [400, send(s, 'POST', path, { body: '{', headers: { ...AUTH, ...JSON_TYPE, ...id(3) } })],
        [400, send(s, 'POST', path, { body: {}, headers: { ...AUTH, ...JSON_TYPE, ...id(4) } })],
        [415, send(s, 'POST', path, { body: 'x', headers: { ...AUTH, 'Content-Type': 'text/plain', ...id(5) } })],
        [404, send(s, 'POST', '/nope', { body: valid(), headers: { ...AUTH, ...JSON_TYPE, ...id(6) } })],
        [405, send(s, 'GET', path, { headers: { ...id(7) } })],
      ];
      for (const [n, [status, pending]] of cases.entries()) {
        const res = await pending;
        expect(res.status, res.text).to.equal(status);
        expect(res.headers.get('x-request-id')).to.equal(`err-${n + 1}`);
      }
    });

    it('echoes an id of exactly 200 characters', async () => {
      const given = 'r'.repeat(200);
      const res = await send(getStack(), 'POST', path, { body: valid(), headers: { ...AUTH, ...JSON_TYPE, 'X-Request-Id': given } });
      expect(res.headers.get('x-request-id')).to.equal(given);
    });

    const replaced: readonly [string, Record<string, string>][] = [
      ['absent', {}],
      ['201 characters', { 'X-Request-Id': 'r'.repeat(201) }],
      ['with spaces', { 'X-Request-Id': 'my request id' }],
    ];
    for (const [name, headers] of replaced) {
      it(`mints a new id when the caller's is ${name}`, async () => {
        const a = await send(getStack(), 'POST', path, { body: valid(), headers: { ...AUTH, ...JSON_TYPE, ...headers } });
        const b = await send(getStack(), 'POST', path, { body: {}, headers: { ...AUTH, ...JSON_TYPE, ...headers } });
        const idA = a.headers.get('x-request-id') ?? '';
        const idB = b.headers.get('x-request-id') ?? '';
        expect(a.status).to.equal(200);
        expect(b.status).to.equal(400);
        for (const id of [idA, idB]) {
          expect(id).to.match(/^[\x21-\x7e]{1,200}$/);
          expect(id).to.not.equal(headers['X-Request-Id']);
        }
        expect(idA).to.not.equal(idB);
      });
    }
  });

  describe('Idempotency-Key header', () => {
    const bad: readonly [string, string][] = [
      ['empty', ''],
      ['256 characters', 'i'.repeat(256)],
      ['with a tab', 'a\tb'],
    ];
    for (const [name, key] of bad) {
      it(`400 invalid_header for a key ${name}`, async () => {
        const res = await send(getStack(), 'POST', path, { body: valid(), headers: { ...AUTH, ...JSON_TYPE, 'Idempotency-Key': key } });
        expectError(res, 400, 'invalid_header');
      });
    }

    it('accepts a key of 255 printable characters', async () => {
      const key = 'i'.repeat(255);
      const res = await send(getStack(), 'POST', path, { body: valid(), headers: { ...AUTH, ...JSON_TYPE, 'Idempotency-Key': key } });
      expectAccepted(res, acceptedStatus);
    });

    it('400 invalid_header for two Idempotency-Key headers (Node would join them into one key "a, b")', async () => {
      const res = await new Promise<{ status: number; body: any }>((resolve, reject) => {
        const req = httpRequest(`${getStack().baseUrl}${path}`, { method: 'POST', agent: false, headers: { ...AUTH, ...JSON_TYPE, 'Idempotency-Key': ['twice-a', 'twice-b'] } }, (r) => {
          let text = '';
          r.setEncoding('utf8');
          r.on('data', (c: string) => (text += c));
          r.on('end', () => resolve({ status: r.statusCode ?? 0, body: JSON.parse(text) }));
        });
        req.on('error', reject);
        req.end(JSON.stringify(valid()));
      });
      expect(res.status).to.equal(400);
      expect(res.body.error.code).to.equal('invalid_header');
      // One header holding the joined text is an ordinary key.
      const joined = await send(getStack(), 'POST', path, { body: valid(), headers: { ...AUTH, ...JSON_TYPE, 'Idempotency-Key': 'twice-a, twice-b' } });
      expectAccepted(joined, acceptedStatus);
    });

    it('accepts a one-character key', async () => {
      const res = await send(getStack(), 'POST', path, { body: valid(), headers: { ...AUTH, ...JSON_TYPE, 'Idempotency-Key': 'A' } });
      expectAccepted(res, acceptedStatus);
    });
  });

  describe('body that is JSON but not an object', () => {
    for (const text of ['[]', '[{}]', '"x"', '3', 'null', 'true']) {
      it(`400 validation_failed for ${text}`, async () => {
        expectError(await send(getStack(), 'POST', path, { body: text, headers: { ...AUTH, ...JSON_TYPE } }), 400, 'validation_failed');
      });
    }

    for (const text of ['"x"', '3', 'null', 'true', '[]', '[{}]']) {
      it(`reports ${text} as "body must be a JSON object"`, async () => {
        const res = await send(getStack(), 'POST', path, { body: text, headers: { ...AUTH, ...JSON_TYPE } });
        const details = expectPaths(res, ['body']);
        expect(details[0]!.message).to.equal('must be a JSON object');
      });
    }
  });
}

/** 413 rows: a stack of its own with BODY_LIMIT_BYTES=2048. */
function bodyLimit(path: string, valid: (s: Stack) => Promise<Json>): void {
  describe('body limit (BODY_LIMIT_BYTES=2048)', () => {
    let stack: Stack;
    let base: Json;
    before(async () => {
      stack = await startStack(testConfig({ BODY_LIMIT_BYTES: '2048' }), { worker: false });
      base = await valid(stack);
    });
    after(async () => {
      await stack?.close();
    });

    /** `base` with a `pad` string added to the response values. */
    const padded = (pad: string): Json => ({ ...base, response: { ...base['response'], values: { ...base['response'].values, pad } } });

    /** `base` padded to exactly `bytes` bytes of JSON. */
    const ofBytes = (bytes: number): string => {
      const text = JSON.stringify(padded('p'.repeat(bytes - Buffer.byteLength(JSON.stringify(padded(''))))));
      expect(Buffer.byteLength(text)).to.equal(bytes);
      return text;
    };

    it('accepts a body of exactly the limit', async () => {
      expectAccepted(await send(stack, 'POST', path, { body: ofBytes(2048), headers: { ...AUTH, ...JSON_TYPE } }), base['response'].status ?? 'submitted');
    });

    it('413 payload_too_large for a body one byte over the limit', async () => {
      expectError(await send(stack, 'POST', path, { body: ofBytes(2049), headers: { ...AUTH, ...JSON_TYPE } }), 413, 'payload_too_large');
    });

    it('413 payload_too_large for a bigger body', async () => {
      const res = await send(stack, 'POST', path, { body: padded('p'.repeat(4000)), headers: { ...AUTH, ...JSON_TYPE } });
      expectError(res, 413, 'payload_too_large');
    });

    it('Content-Encoding: a gzip or deflate body is inflated and accepted; the limit counts inflated bytes (a bomb is 413); bytes that do not inflate are 400 saying so; another coding is 415', async () => {
      const text = ofBytes(2000);
      const headers = (coding: string) => ({ ...AUTH, ...JSON_TYPE, 'Content-Encoding': coding });
      for (const [coding, bytes] of [['gzip', gzipSync(text)], ['deflate', deflateSync(text)]] as const) {
        const res = await send(stack, 'POST', path, { body: bytes, headers: headers(coding) });
        expectAccepted(res, base['response'].status ?? 'submitted');
      }
      // 2,049 bytes once inflated, far fewer sent.
      const bomb = await send(stack, 'POST', path, { body: gzipSync(ofBytes(2049)), headers: headers('gzip') });
      expectError(bomb, 413, 'payload_too_large');
      // A gzip header followed by bytes that are no deflate stream.
      const bad = await send(stack, 'POST', path, { body: Buffer.concat([gzipSync(text).subarray(0, 10), Buffer.from('not gzip at all')]), headers: headers('gzip') });
      expectError(bad, 400, 'invalid_json');
      expect(bad.body.error.message).to.equal('the body does not inflate as its Content-Encoding says (gzip)');
      expectError(await send(stack, 'POST', path, { body: text, headers: headers('br') }), 415, 'unsupported_media_type');
    });

    it('413 payload_too_large counts bytes, not characters', async () => {
      // 1000 characters, 3000 bytes in UTF-8.
      const res = await send(stack, 'POST', path, { body: padded('€'.repeat(1000)), headers: { ...AUTH, ...JSON_TYPE } });
      expectError(res, 413, 'payload_too_large');
    });

    it('413 payload_too_large for a bigger body sent chunked (no Content-Length)', async () => {
      const text = JSON.stringify(padded('p'.repeat(4000)));
      const res = await postChunked(stack, path, [text.slice(0, 1000), text.slice(1000, 3000), text.slice(3000)]);
      expect(res.status).to.equal(413);
      expect(res.body?.error?.code).to.equal('payload_too_large');
    });

    it('413 payload_too_large for a bigger body without Content-Type', async () => {
      const res = await send(stack, 'POST', path, { body: Buffer.from(JSON.stringify(padded('p'.repeat(4000)))), headers: { ...AUTH } });
      expectError(res, 413, 'payload_too_large');
    });
  });
}

/** Key-name and depth rules for one JSON object of the body. */
function keyRules(getStack: () => Stack, path: string, location: KeyedLocation): void {
  describe(`key names in ${location.path}`, () => {
    for (const bad of BAD_KEYS) {
      it(`400 validation_failed for a key ${bad.name}, at the top, nested and inside a list`, async () => {
        const obj = withKey(bad.key, 1, { ok: 'fine', nest: withKey(bad.key, { deeper: true }, { fine: 1 }), list: [{ ok: 1 }, withKey(bad.key, 'x')] });
        const res = await getStack().post(path, location.body(obj));
        expectPaths(res, [`${location.path}${bad.seg}`, `${location.path}.nest${bad.seg}`, `${location.path}.list[1]${bad.seg}`]);
      });
    }

    it('400 validation_failed (not invalid_json) for constructor.prototype, which is valid JSON', async () => {
      const res = await getStack().post(path, location.body({ ok: 1, constructor: { prototype: { polluted: true } } }));
      expect(validationDetails(res).map((d) => d.path)).to.include(`${location.path}.constructor`);
    });

    it('accepts keys that only resemble forbidden ones', async () => {
      const res = await getStack().post(path, location.body({ 'price$': 1, Constructor: 2, _proto_: 3, 'ключ': 4, '🙂': 5, [`${'k'.repeat(200)}`]: 6 }));
      expect(res.status, res.text).to.equal(200);
    });
  });

  describe(`nesting depth in ${location.path} (level 3 of the body)`, () => {
    it('accepts 32 levels of objects', async () => {
      const res = await getStack().post(path, location.body({ deep: nest(29) }));
      expect(res.status, res.text).to.equal(200);
    });

    it('rejects 33 levels of objects, naming the object too deep', async () => {
      const res = await getStack().post(path, location.body({ deep: nest(30) }));
      const details = expectPaths(res, [`${location.path}.deep${'.d'.repeat(29)}`]);
      expect(details[0]!.message).to.include('32');
    });

    it('counts lists as levels: 32 accepted, 33 rejected', async () => {
      // deep_list (level 4) -> its object (5) -> 28 more objects: level 32.
      const ok = await getStack().post(path, location.body({ deep_list: [nest(28)] }));
      expect(ok.status, ok.text).to.equal(200);
      const res = await getStack().post(path, location.body({ deep_list: [nest(29)] }));
      expectPaths(res, [`${location.path}.deep_list[0]${'.d'.repeat(28)}`]);
    });

    it('rejects an empty object or list at level 33; a scalar there is fine', async () => {
      // 29 objects below the location (level 3): the innermost, at level 32, holds `e`.
      const holding = (leaf: unknown): Json => {
        let o: Json = { e: leaf };
        for (let i = 0; i < 29; i++) o = { d: o };
        return o;
      };
      for (const leaf of [{}, []]) {
        const res = await getStack().post(path, location.body(holding(leaf)));
        expectPaths(res, [`${location.path}${'.d'.repeat(29)}.e`]);
      }
      const ok = await getStack().post(path, location.body(holding('a scalar inside level 32')));
      expect(ok.status, ok.text).to.equal(200);
    });
  });
}

describe('POST /feedback-record', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack(testConfig());
  });
  after(async () => {
    await stack?.close();
  });

  const valid = (): Json => recordBody();
  commonRules('/feedback-record', () => stack, valid, 'submitted');
  bodyLimit('/feedback-record', async () => recordBody({ response: { values: { helpful: 1 } } }));

  describe('validation', () => {
    it('accepts a full body and answers {feedback_record_id, feedback_response_id, status}', async () => {
      const res = await stack.post('/feedback-record', recordBody({ record: { external_id: 'conv-1', metadata: { model: 'gpt-x' } }, response: { status: 'draft', user_id: 'u-1' } }));
      expectAccepted(res, 'draft');
      expect(res.body.feedback_record_id).to.not.equal(res.body.feedback_response_id);
    });

    it('status defaults to submitted', async () => {
      expectAccepted(await stack.post('/feedback-record', recordBody()), 'submitted');
    });

    requiredFields('/feedback-record', () => stack, valid, ['record', 'response', 'record.feedback_dataset_id', 'record.field_to_value', 'response.values']);

    it('lists every missing field at once', async () => {
      expectPaths(await stack.post('/feedback-record', { record: {}, response: {} }), ['record.feedback_dataset_id', 'record.field_to_value', 'response.values']);
      expectPaths(await stack.post('/feedback-record', {}), ['record', 'response']);
    });

    const wrongTypes: readonly [string, Json][] = [
      ['record', { record: 'x' }],
      ['record', { record: null }],
      ['response', { response: 7 }],
      ['record.feedback_dataset_id', { record: { feedback_dataset_id: 42 } }],
      ['record.feedback_dataset_id', { record: { feedback_dataset_id: null } }],
      ['record.field_to_value', { record: { field_to_value: 'text' } }],
      ['record.field_to_value', { record: { field_to_value: ['a'] } }],
      ['record.field_to_value', { record: { field_to_value: null } }],
      ['record.external_id', { record: { external_id: 5 } }],
      ['record.external_id', { record: { external_id: null } }],
      ['record.metadata', { record: { metadata: 'x' } }],
      ['record.metadata', { record: { metadata: [1] } }],
      ['response.values', { response: { values: [1, 2] } }],
      ['response.values', { response: { values: 'good' } }],
      ['response.status', { response: { status: 1 } }],
      ['response.user_id', { response: { user_id: 77 } }],
    ];
    for (const [field, patch] of wrongTypes) {
      it(`400 validation_failed for ${field} = ${JSON.stringify(Object.values(patch)[0])}`, async () => {
        const base = recordBody();
        const body: Json = { ...base };
        for (const [k, v] of Object.entries(patch)) {
          body[k] = v !== null && typeof v === 'object' && !Array.isArray(v) ? { ...(base as Json)[k], ...v } : v;
        }
        expectPaths(await stack.post('/feedback-record', body), [field]);
      });
    }

    it('a list where record or response is expected is a wrong type at that path', async () => {
      expectPaths(await stack.post('/feedback-record', { ...recordBody(), record: [] }), ['record']);
      expectPaths(await stack.post('/feedback-record', { ...recordBody(), response: [{ values: { a: 1 } }] }), ['response']);
    });

    it('lists every wrong type at once', async () => {
      const res = await stack.post('/feedback-record', {
        record: { feedback_dataset_id: 1, field_to_value: 'x', external_id: 2, metadata: 3 },
        response: { values: 4, status: 'nope', user_id: 5 },
      });
      expectPaths(res, ['record.feedback_dataset_id', 'record.field_to_value', 'record.external_id', 'record.metadata', 'response.values', 'response.status', 'response.user_id']);
    });

    for (const status of ['SUBMITTED', 'approved', '', null, 'draft ']) {
      it(`400 validation_failed for response.status ${JSON.stringify(status)}`, async () => {
        const details = expectPaths(await stack.post('/feedback-record', recordBody({ response: { status } })), ['response.status']);
        expect(details[0]!.message).to.equal(STATUS_MESSAGE);
      });
    }

    for (const status of ['draft', 'submitted', 'discarded']) {
      it(`accepts response.status ${status} and answers it`, async () => {
        expectAccepted(await stack.post('/feedback-record', recordBody({ response: { status } })), status);
      });
    }

    for (const [level, patch, where] of [
      ['body', { extra: 1 }, 'extra'],
      ['record', { record: { extra: 1 } }, 'record.extra'],
      ['response', { response: { extra: 1 } }, 'response.extra'],
    ] as const) {
      it(`400 validation_failed for an unknown property in ${level}`, async () => {
        const base = recordBody();
        const body: Json = level === 'body' ? { ...base, ...patch } : { ...base, [level]: { ...(base as Json)[level], extra: 1 } };
        const details = expectPaths(await stack.post('/feedback-record', body), [where]);
        expect(details[0]!.message).to.equal('is not a known property');
      });
    }

    it('lists unknown properties at every level at once', async () => {
      const base = recordBody();
      const res = await stack.post('/feedback-record', { ...base, extra: 1, record: { ...base.record, extra: 1 }, response: { ...base.response, extra: 1 } });
      expectPaths(res, ['extra', 'record.extra', 'response.extra']);
    });

    it('lists every unknown property of one object, not just the first', async () => {
      const base = recordBody();
      const res = await stack.post('/feedback-record', { ...base, record: { ...base.record, first_extra: 1, second_extra: 2 } });
      expectPaths(res, ['record.first_extra', 'record.second_extra']);
    });

    it('rejects unknown properties named like Object.prototype members', async () => {
      const base = recordBody();
      const res = await stack.post('/feedback-record', { ...base, toString: 'x', record: { ...base.record, constructor: 1 }, response: { ...base.response, prototype: 2 } });
      expectPaths(res, ['toString', 'record.constructor', 'response.prototype']);
      const more = await stack.post('/feedback-record', { ...base, record: { ...base.record, hasOwnProperty: 1 }, response: { ...base.response, valueOf: 2 } });
      expectPaths(more, ['record.hasOwnProperty', 'response.valueOf']);
    });

    it('400 validation_failed for values {} unless the status is discarded', async () => {
      for (const response of [{ values: {} }, { values: {}, status: 'submitted' }, { values: {}, status: 'draft' }]) {
        expectPaths(await stack.post('/feedback-record', recordBody({ response })), ['response.values']);
      }
      expectAccepted(await stack.post('/feedback-record', recordBody({ response: { values: {}, status: 'discarded' } })), 'discarded');
    });

    it('400 validation_failed for field_to_value {}', async () => {
      expectPaths(await stack.post('/feedback-record', recordBody({ record: { field_to_value: {} } })), ['record.field_to_value']);
    });

    it('accepts metadata {}', async () => {
      expectAccepted(await stack.post('/feedback-record', recordBody({ record: { metadata: {} } })));
    });

    it('feedback_dataset_id: empty and 257 characters rejected, 1 and 256 accepted', async () => {
      for (const id of ['', 'd'.repeat(257)]) {
        expectPaths(await stack.post('/feedback-record', recordBody({ record: { feedback_dataset_id: id } })), ['record.feedback_dataset_id']);
      }
      for (const id of ['d', 'd'.repeat(256)]) {
        expectAccepted(await stack.post('/feedback-record', recordBody({ record: { feedback_dataset_id: id } })));
      }
    });

    it('400 validation_failed for an empty user_id', async () => {
      expectPaths(await stack.post('/feedback-record', recordBody({ response: { user_id: '' } })), ['response.user_id']);
    });

    it('answers 400 to a hostile, very deep body and keeps serving', async () => {
      const n = 100_000;
      const text = `{"record":{"feedback_dataset_id":"ds","field_to_value":${'{"a":'.repeat(n)}1${'}'.repeat(n)}},"response":{"values":{"v":${'['.repeat(n)}${']'.repeat(n)}}}}`;
      const res = await send(stack, 'POST', '/feedback-record', { body: text, headers: { ...AUTH, ...JSON_TYPE } });
      const details = validationDetails(res);
      expect(details.map((d) => d.path)).to.include.members([`record.field_to_value${'.a'.repeat(30)}`, `response.values.v${'[0]'.repeat(29)}`]);
      expectAccepted(await stack.post('/feedback-record', recordBody()));
    });
  });

  const recordLocations: KeyedLocation[] = [
    { path: 'record.field_to_value', body: (obj) => recordBody({ record: { field_to_value: obj } }) },
    { path: 'record.metadata', body: (obj) => recordBody({ record: { metadata: obj } }) },
    { path: 'response.values', body: (obj) => recordBody({ response: { values: obj } }) },
  ];
  for (const location of recordLocations) keyRules(() => stack, '/feedback-record', location);

  describe('storage', () => {
    it('stores field_to_value, metadata and values of every JSON type unchanged', async () => {
      const body = recordBody({
        record: { feedback_dataset_id: 'ds_variety', field_to_value: VARIETY, metadata: { ...VARIETY, model: 'gpt-x' }, external_id: 'ext-ü-🙂' },
        response: { values: VARIETY, user_id: 'ünïcode-user 🙂' },
      });
      const res = await stack.post('/feedback-record', body);
      expectAccepted(res);
      const rec = await stored(() => records(stack.db).findOne({ _id: res.body.feedback_record_id }), 'record');
      expect(rec['feedback_dataset_id']).to.equal('ds_variety');
      expect(rec['external_id']).to.equal('ext-ü-🙂');
      expect(rec['field_to_value']).to.deep.equal(VARIETY);
      expect(rec['metadata']).to.deep.equal({ ...VARIETY, model: 'gpt-x' });
      const rsp = await stored(() => responses(stack.db).findOne({ _id: res.body.feedback_response_id }), 'response');
      expect(rsp['values']).to.deep.equal(VARIETY);
      expect(rsp['user_id']).to.equal('ünïcode-user 🙂');
      expect(rsp['status']).to.equal('submitted');
    });

    it('stores 32 levels of nesting unchanged', async () => {
      const deep = { deep: nest(29), deep_list: [nest(28)] };
      const res = await stack.post('/feedback-record', recordBody({ record: { field_to_value: deep } }));
      expectAccepted(res);
      const rec = await stored(() => records(stack.db).findOne({ _id: res.body.feedback_record_id }), 'deep record');
      expect(rec['field_to_value']).to.deep.equal(deep);
    });

    it('stores a discarded response with empty values', async () => {
      const res = await stack.post('/feedback-record', recordBody({ response: { values: {}, status: 'discarded' } }));
      expectAccepted(res, 'discarded');
      const rsp = await stored(() => responses(stack.db).findOne({ _id: res.body.feedback_response_id }), 'discarded response');
      expect(rsp['values']).to.deep.equal({});
      expect(rsp['status']).to.equal('discarded');
      expect(rsp['user_id']).to.equal(TEST_KEY.name);
    });
  });
});

describe('POST /feedback-response', () => {
  let stack: Stack;
  /** A record the API minted (and queued) for this suite. */
  let recordId: string;
  before(async () => {
    stack = await startStack(testConfig());
    const res = await stack.post('/feedback-record', recordBody());
    expect(res.status, res.text).to.equal(200);
    recordId = res.body.feedback_record_id as string;
  });
  after(async () => {
    await stack?.close();
  });

  const valid = (): Json => ({ feedback_record_id: recordId, response: { status: 'submitted', values: { helpful: 2 }, user_id: 'annotator-1' } });
  const withResponse = (response: Json): Json => ({ feedback_record_id: recordId, response: { status: 'draft', values: { helpful: 3 }, ...response } });

  commonRules('/feedback-response', () => stack, valid, 'submitted');
  bodyLimit('/feedback-response', async (s) => {
    const rec = await s.post('/feedback-record', recordBody());
    expect(rec.status, rec.text).to.equal(200);
    return { feedback_record_id: rec.body.feedback_record_id, response: { status: 'draft', values: { helpful: 1 } } };
  });

  describe('validation', () => {
    requiredFields('/feedback-response', () => stack, valid, ['feedback_record_id', 'response', 'response.status', 'response.values']);

    it('lists every missing field at once', async () => {
      expectPaths(await stack.post('/feedback-response', {}), ['feedback_record_id', 'response']);
      expectPaths(await stack.post('/feedback-response', { feedback_record_id: recordId, response: {} }), ['response.status', 'response.values']);
    });

    const wrongTypes: readonly [string, Json][] = [
      ['feedback_record_id', { feedback_record_id: 12 }],
      ['feedback_record_id', { feedback_record_id: null }],
      ['feedback_record_id', { feedback_record_id: '' }],
      ['response', { response: 'x' }],
      ['response.values', { response: { status: 'draft', values: [] } }],
      ['response.values', { response: { status: 'draft', values: 3 } }],
      ['response.values', { response: { status: 'draft', values: null } }],
      ['response.status', { response: { status: true, values: { a: 1 } } }],
      ['response.user_id', { response: { status: 'draft', values: { a: 1 }, user_id: ['u'] } }],
      ['response.user_id', { response: { status: 'draft', values: { a: 1 }, user_id: '' } }],
    ];
    for (const [field, patch] of wrongTypes) {
      it(`400 validation_failed for ${field} = ${JSON.stringify(Object.values(patch)[0])}`, async () => {
        expectPaths(await stack.post('/feedback-response', { ...valid(), ...patch }), [field]);
      });
    }

    it('a list where response is expected is a wrong type at that path', async () => {
      expectPaths(await stack.post('/feedback-response', { ...valid(), response: [] }), ['response']);
    });

    it('lists every wrong type at once', async () => {
      expectPaths(await stack.post('/feedback-response', { feedback_record_id: 1, response: { status: 2, values: 3, user_id: 4 } }), [
        'feedback_record_id',
        'response.status',
        'response.values',
        'response.user_id',
      ]);
    });

    for (const status of ['Draft', 'approved', '', null, 'submitted\n']) {
      it(`400 validation_failed for response.status ${JSON.stringify(status)}`, async () => {
        const details = expectPaths(await stack.post('/feedback-response', withResponse({ status })), ['response.status']);
        expect(details[0]!.message).to.equal(STATUS_MESSAGE);
      });
    }

    for (const [level, where] of [
      ['body', 'extra'],
      ['response', 'response.extra'],
    ] as const) {
      it(`400 validation_failed for an unknown property in ${level}`, async () => {
        const base = valid();
        const body = level === 'body' ? { ...base, extra: 1 } : { ...base, response: { ...base['response'], extra: 1 } };
        const details = expectPaths(await stack.post('/feedback-response', body), [where]);
        expect(details[0]!.message).to.equal('is not a known property');
      });
    }

    it('rejects record fields sent to /feedback-response as unknown properties', async () => {
      expectPaths(await stack.post('/feedback-response', { ...valid(), feedback_dataset_id: 'ds' }), ['feedback_dataset_id']);
    });

    it('400 validation_failed for values {} unless the status is discarded', async () => {
      for (const status of ['draft', 'submitted']) {
        expectPaths(await stack.post('/feedback-response', withResponse({ status, values: {} })), ['response.values']);
      }
      expectAccepted(await stack.post('/feedback-response', withResponse({ status: 'discarded', values: {}, user_id: 'discarder' })), 'discarded');
    });
  });

  keyRules(() => stack, '/feedback-response', { path: 'response.values', body: (obj) => withResponse({ values: obj }) });

  describe('records and response ids', () => {
    it('404 record_not_found for ids the API did not mint', async () => {
      const foreign = createIdMinter(['another-secret-nobody-uses-0123']).newRecordId('ds_test');
      const sameShape = `rec_${'A'.repeat(22)}${'B'.repeat(12)}`;
      for (const id of ['rec_unknown', 'x', sameShape, foreign, `${recordId}x`, recordId.slice(0, -1)]) {
        const res = await stack.post('/feedback-response', { feedback_record_id: id, response: { status: 'draft', values: { a: 1 } } });
        expectError(res, 404, 'record_not_found');
      }
    });

    it('404 record_not_found for a minted id with one character changed', async () => {
      for (const at of [4, 15, recordId.length - 1]) {
        const ch = recordId[at]!;
        const changed = `${recordId.slice(0, at)}${ch === 'Q' ? 'R' : 'Q'}${recordId.slice(at + 1)}`;
        const res = await stack.post('/feedback-response', { feedback_record_id: changed, response: { status: 'draft', values: { a: 1 } } });
        expectError(res, 404, 'record_not_found');
      }
    });

    it('404 record_not_found for another spelling of a minted id (non-canonical base64url)', async () => {
      // The last character of the 22-character body carries 4 unused bits: flipping one of them
      // names a different id (a record nobody stored) that decodes to the same bytes.
      const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
      const at = 'rec_'.length + 21;
      const variant = `${recordId.slice(0, at)}${alphabet[alphabet.indexOf(recordId[at]!) ^ 1]}${recordId.slice(at + 1)}`;
      expect(variant).to.not.equal(recordId);
      const res = await stack.post('/feedback-response', { feedback_record_id: variant, response: { status: 'draft', values: { a: 1 } } });
      expectError(res, 404, 'record_not_found');
    });

    it('200 for a minted id, with {feedback_record_id, feedback_response_id, status} and status as sent', async () => {
      for (const status of ['draft', 'submitted', 'discarded']) {
        const res = await stack.post('/feedback-response', withResponse({ status, user_id: `ann-${status}` }));
        expectAccepted(res, status);
        expect(res.body.feedback_record_id).to.equal(recordId);
      }
    });

    it('the response id is the same for the same (record, user_id) and differs for another user_id', async () => {
      const a1 = await stack.post('/feedback-response', withResponse({ user_id: 'same-annotator' }));
      const a2 = await stack.post('/feedback-response', withResponse({ user_id: 'same-annotator', status: 'submitted', values: { helpful: 5 } }));
      const b = await stack.post('/feedback-response', withResponse({ user_id: 'another-annotator' }));
      expectAccepted(a1, 'draft');
      expectAccepted(a2, 'submitted');
      expectAccepted(b, 'draft');
      expect(a2.body.feedback_response_id).to.equal(a1.body.feedback_response_id);
      expect(b.body.feedback_response_id).to.not.equal(a1.body.feedback_response_id);
    });

    it('the response id differs for another record with the same user_id', async () => {
      const other = await stack.post('/feedback-record', recordBody());
      const a = await stack.post('/feedback-response', withResponse({ user_id: 'cross-record' }));
      const b = await stack.post('/feedback-response', { feedback_record_id: other.body.feedback_record_id, response: { status: 'draft', values: { x: 1 }, user_id: 'cross-record' } });
      expectAccepted(b, 'draft');
      expect(b.body.feedback_response_id).to.not.equal(a.body.feedback_response_id);
    });

    it('the default user_id is the API key name', async () => {
      const rec = await stack.post('/feedback-record', recordBody());
      expectAccepted(rec);
      const id = rec.body.feedback_record_id as string;
      const implicit = await stack.post('/feedback-response', { feedback_record_id: id, response: { status: 'draft', values: { a: 1 } } });
      const explicit = await stack.post('/feedback-response', { feedback_record_id: id, response: { status: 'draft', values: { a: 2 }, user_id: TEST_KEY.name } });
      const otherKey = await stack.post('/feedback-response', { feedback_record_id: id, response: { status: 'draft', values: { a: 3 } } }, { Authorization: `Bearer ${OTHER_KEY.secret}` });
      expectAccepted(implicit, 'draft');
      // The record's first response had no user_id either: the same annotator, the same response.
      expect(implicit.body.feedback_response_id).to.equal(rec.body.feedback_response_id);
      expect(explicit.body.feedback_response_id).to.equal(implicit.body.feedback_response_id);
      expect(otherKey.body.feedback_response_id).to.not.equal(implicit.body.feedback_response_id);
      const doc = await stored(() => responses(stack.db).findOne({ _id: otherKey.body.feedback_response_id }), 'response of the other key');
      expect(doc['user_id']).to.equal(OTHER_KEY.name);
    });
  });

  describe('storage', () => {
    it('stores values of every JSON type unchanged', async () => {
      const res = await stack.post('/feedback-response', withResponse({ status: 'submitted', values: VARIETY, user_id: 'variety-annotator' }));
      expectAccepted(res);
      const doc = await stored(() => responses(stack.db).findOne({ _id: res.body.feedback_response_id }), 'response');
      expect(doc['values']).to.deep.equal(VARIETY);
      expect(doc).to.include({ feedback_record_id: recordId, user_id: 'variety-annotator', status: 'submitted', feedback_dataset_id: 'ds_test' });
    });
  });
});

describe('service endpoints', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack(testConfig(), { worker: false });
  });
  after(async () => {
    await stack?.close();
  });

  it('GET /healthz is 200 with an X-Request-Id', async () => {
    const res = await send(stack, 'GET', '/healthz');
    expect(res.status).to.equal(200);
    expect(res.headers.get('x-request-id') ?? '').to.match(/^[\x21-\x7e]{1,200}$/);
  });

  it('GET /readyz is 200 when Redis answers', async () => {
    const res = await send(stack, 'GET', '/readyz', { headers: { 'X-Request-Id': 'ready-1' } });
    expect(res.status, res.text).to.equal(200);
    expect(res.body).to.include({ status: 'ready', redis: 'up' });
    expect(res.headers.get('x-request-id')).to.equal('ready-1');
  });

  it('405 method_not_allowed with Allow for POST /healthz', async () => {
    const res = await send(stack, 'POST', '/healthz', { body: {}, headers: { ...JSON_TYPE } });
    expectError(res, 405, 'method_not_allowed');
    expect(res.headers.get('allow') ?? '').to.include('GET');
  });

  it('GET /metrics is Prometheus text counting the requests served', async () => {
    expectAccepted(await stack.post('/feedback-record', recordBody()));
    expectError(await send(stack, 'POST', '/feedback-record', { body: recordBody(), headers: { ...JSON_TYPE } }), 401, 'unauthorized');
    const res = await send(stack, 'GET', '/metrics');
    expect(res.status).to.equal(200);
    expect(res.headers.get('content-type') ?? '').to.match(/^text\/plain/);
    expect(res.text).to.include('# TYPE feedback_api_http_requests_total counter');
    const lines = res.text.split('\n').filter((l) => l.startsWith('feedback_api_http_requests_total{'));
    const count = (status: string) => {
      const line = lines.find((l) => l.includes('route="/feedback-record"') && l.includes('method="POST"') && l.includes(`status="${status}"`));
      expect(line, `${status} line in\n${lines.join('\n')}`).to.be.a('string');
      return Number(line!.split(' ').pop());
    };
    expect(count('200')).to.be.at.least(1);
    expect(count('401')).to.be.at.least(1);
  });
});

describe('requests Node\'s HTTP parser refuses', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack(testConfig(), { worker: false });
  });
  after(async () => {
    await stack?.close();
  });

  /** Sends `head` + blank line + `body` on a raw socket; resolves with what the server wrote before closing. */
  function raw(head: string, body = ''): Promise<{ status: number; headers: Map<string, string>; json: any }> {
    const port = Number(new URL(stack.baseUrl).port);
    return new Promise((resolve, reject) => {
      const socket = connect(port, '127.0.0.1');
      let text = '';
      socket.setEncoding('latin1');
      socket.on('data', (d: string) => (text += d));
      socket.on('error', reject);
      socket.on('close', () => {
        const [top = '', rest = ''] = text.split('\r\n\r\n', 2);
        const [statusLine = '', ...lines] = top.split('\r\n');
        const headers = new Map(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()] as const));
        let json: unknown;
        try {
          json = JSON.parse(rest);
        } catch {
          json = undefined;
        }
        resolve({ status: Number(statusLine.split(' ')[1]), headers, json });
      });
      socket.end(`${head}\r\n\r\n${body}`);
    });
  }

  const body = '{"record":{"feedback_dataset_id":"d","field_to_value":{"a":1}},"response":{"values":{"a":1}}}';
  const cases: readonly [string, string, number, string][] = [
    ['two different Content-Length headers', `Content-Length: ${body.length}\r\nContent-Length: ${body.length + 1}`, 400, 'bad_request'],
    ['Transfer-Encoding with Content-Length', `Transfer-Encoding: chunked\r\nContent-Length: ${body.length}`, 400, 'bad_request'],
    ['a control byte in a header value', `X-Odd: a\u0001b\r\nContent-Length: ${body.length}`, 400, 'bad_request'],
    ['headers over 16 KiB', `X-Pad: ${'p'.repeat(20_000)}\r\nContent-Length: ${body.length}`, 431, 'headers_too_large'],
  ];
  for (const [name, headers, status, code] of cases) {
    it(`${status} ${code} in the error shape, with an X-Request-Id, for ${name}`, async () => {
      const res = await raw(`POST /feedback-record HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer ${TEST_KEY.secret}\r\nContent-Type: application/json\r\n${headers}`, body);
      expect(res.status).to.equal(status);
      expect(res.json).to.deep.equal({ error: { code, message: res.json?.error?.message } });
      expect(res.json.error.message).to.be.a('string').with.length.greaterThan(0);
      expect(res.headers.get('x-request-id') ?? '').to.not.equal('');
      expect(res.headers.get('content-type') ?? '').to.match(/^application\/json/);
    });
  }
});
