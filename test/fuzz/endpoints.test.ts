import assert from 'node:assert/strict';
import { Agent } from 'node:http';
import { connect } from 'node:net';
import { isDeepStrictEqual } from 'node:util';
import fc from 'fast-check';
import { Cluster, LEDGER_KEY, until } from '../faults/cluster.js';
import { errorShape, send, type HttpAnswer } from '../faults/http.js';
import { msg, type ServiceProcess } from '../../devkit/processes.js';
import { recordFuzz } from '../faults/report.js';
import { anyJsonValue, applyMutation, recordMutation, responseMutation, text, validRecordBody, validResponseBody } from './arbitraries.js';
import { recordBodyProblems, responseBodyProblems } from './oracle.js';
import { rawExchange, type RawAnswer } from './raw.js';

/**
 * Property-based fuzzing of POST /feedback-record and POST /feedback-response against the real
 * `web` process (and a worker, to check that what is accepted is stored unchanged). Expected
 * answers come from test/fuzz/oracle.ts, an independent reading of the contract; the API must
 * never answer 5xx, always use the documented error shape, and stay up.
 */

/** The error table of docs/api.md: code -> status. */
const DOCUMENTED: Readonly<Record<string, number>> = {
  invalid_json: 400,
  validation_failed: 400,
  invalid_header: 400,
  unauthorized: 401,
  invalid_api_key: 401,
  forbidden: 403,
  not_found: 404,
  record_not_found: 404,
  method_not_allowed: 405,
  idempotency_key_reused: 409,
  idempotency_key_in_use: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  rate_limited: 429,
};

const BODY_LIMIT = 1024 * 1024;

/** One seed per run, printed, so that a finding can be replayed with FUZZ_SEED=<seed>. */
const SEED = process.env['FUZZ_SEED'] !== undefined ? Number(process.env['FUZZ_SEED']) : Math.floor(Math.random() * 2 ** 31);
fc.configureGlobal({ seed: SEED });
process.stderr.write(`fuzz: fast-check seed ${SEED} (replay with FUZZ_SEED=${SEED} npm run test:faults -- --grep "bad input")\n`);

/** Where two JSON-like values first differ, with both sides there, for a readable failure. */
function firstDifference(stored: unknown, sent: unknown, path = '$'): string | undefined {
  if (isDeepStrictEqual(stored, sent)) return undefined;
  const bothObjects = typeof stored === 'object' && stored !== null && typeof sent === 'object' && sent !== null && Array.isArray(stored) === Array.isArray(sent) && Object.getPrototypeOf(stored) === Object.getPrototypeOf(sent);
  if (bothObjects) {
    const a = stored as Record<string, unknown>;
    const b = sent as Record<string, unknown>;
    for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) {
      const d = firstDifference(a[k], b[k], `${path}[${JSON.stringify(k)}]`);
      if (d !== undefined) return d;
    }
  }
  const show = (v: unknown) => `${Object.prototype.toString.call(v)} ${Buffer.isBuffer(v) ? `Buffer(${v.length})` : JSON.stringify(v)?.slice(0, 300)}`;
  return `at ${path}: stored ${show(stored)}, sent ${show(sent)}`;
}
const SANE_REQUEST_ID = /^[\x21-\x7e]{1,200}$/;

/** An acceptable answer: a 200 (`code` undefined) or an error with its code. */
interface Expect {
  readonly status: number;
  readonly code?: string;
}
const OK: Expect = { status: 200 };
const err = (code: string): Expect => ({ status: DOCUMENTED[code]!, code });

interface Accepted {
  readonly endpoint: 'record' | 'response';
  /** The body as the API must have read it. */
  readonly body: Record<string, any>;
  readonly recordId: string;
  readonly responseId: string;
  readonly seq: number;
}

interface Tally {
  tried: number;
  bad: number;
  accepted: number;
  s4xx: number;
  s5xx: number;
}

type Answer = { status: number; headers: Readonly<Record<string, string | string[] | undefined>>; text: string; json: unknown };

function fromRaw(r: RawAnswer): Answer {
  let json: unknown;
  try {
    json = r.body === '' ? undefined : JSON.parse(r.body);
  } catch {
    json = undefined;
  }
  const headers: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(r.headers)) headers[k] = v.length === 1 ? v[0]! : v;
  return { status: r.status, headers, text: r.body, json };
}

function header(a: Answer, name: string): string | undefined {
  const v = a.headers[name];
  return Array.isArray(v) ? v[0] : v;
}


describe('bad input: property-based fuzzing of both endpoints (fast-check, real processes)', function () {
  let cluster: Cluster;
  let api: ServiceProcess & { url: string; port: number };
  let worker: ServiceProcess;
  const agent = new Agent({ keepAlive: true, maxSockets: 4 });
  const pool: string[] = [];
  const accepted: Accepted[] = [];
  let seq = 0;
  const totals: Tally = { tried: 0, bad: 0, accepted: 0, s4xx: 0, s5xx: 0 };
  const authHeaders = { 'Content-Type': 'application/json', Authorization: `Bearer ${LEDGER_KEY.secret}` };

  before(async function () {
    this.timeout(90_000);
    cluster = await new Cluster({ label: 'fuzz', env: { HTTP_HEADERS_TIMEOUT_MS: '1000', HTTP_REQUEST_TIMEOUT_MS: '3000' } }).start();
    [api, worker] = await Promise.all([cluster.startApi(), cluster.startWorker()]);
    // Records that POST /feedback-response bodies point to.
    for (let i = 0; i < 8; i++) {
      const res = await send(api.url, '/feedback-record', { headers: authHeaders, body: JSON.stringify({ record: { feedback_dataset_id: 'fuzz', field_to_value: { i } }, response: { values: { i } } }) });
      assert.equal(res.status, 200, res.text);
      pool.push((res.json as { feedback_record_id: string }).feedback_record_id);
    }
  });

  after(async function () {
    this.timeout(60_000);
    agent.destroy();
    await cluster?.close();
  });

  /**
   * Checks one answer against the acceptable ones and the rules every answer follows; books a 200
   * for the storage check. `read` is the body as the API must have read it (undefined if none).
   */
  function judge(tally: Tally, what: string, a: Answer, expected: readonly Expect[], endpoint: 'record' | 'response' | undefined, read: unknown, sentRequestId?: string): void {
    tally.tried++;
    totals.tried++;
    const expectsOk = expected.some((e) => e.status === 200);
    if (!expectsOk) {
      tally.bad++;
      totals.bad++;
    }
    if (a.status >= 500) {
      tally.s5xx++;
      totals.s5xx++;
    } else if (a.status >= 400) {
      tally.s4xx++;
      totals.s4xx++;
    }
    const context = () => `${what}\nanswer: ${a.status} ${a.text.slice(0, 400)}\nexpected one of: ${JSON.stringify(expected)}`;
    assert.ok(a.status < 500, `5xx: ${context()}`);
    const rid = header(a, 'x-request-id');
    assert.ok(rid !== undefined && rid.length > 0, `no X-Request-Id: ${context()}`);
    if (sentRequestId !== undefined && SANE_REQUEST_ID.test(sentRequestId)) assert.equal(rid, sentRequestId, `X-Request-Id not echoed: ${context()}`);
    if (a.status >= 400) {
      const shape = errorShape(a.json);
      assert.ok(shape !== undefined, `not the documented error shape: ${context()}`);
      assert.equal(DOCUMENTED[shape.code], a.status, `code ${shape.code} with status ${a.status}: ${context()}`);
      assert.ok(expected.some((e) => e.status === a.status && e.code === shape.code), `unexpected answer: ${context()}`);
      if (shape.code === 'validation_failed') assert.ok(Array.isArray(shape.details) && shape.details.length > 0, `validation_failed without details: ${context()}`);
      else assert.equal(shape.details, undefined, `details on ${shape.code}: ${context()}`);
      if (a.status === 401) assert.match(header(a, 'www-authenticate') ?? '', /^Bearer/, context());
      // POST for the write paths, GET for GET /feedback-record/{id}.
      if (a.status === 405) assert.match(header(a, 'allow') ?? '', what.includes(' /feedback-record/x ') ? /\bGET\b/ : /\bPOST\b/, context());
      return;
    }
    assert.ok(expected.some((e) => e.status === a.status), `unexpected answer: ${context()}`);
    if (a.status !== 200 || endpoint === undefined) return;
    const ids = a.json as { feedback_record_id?: unknown; feedback_response_id?: unknown; status?: unknown };
    assert.ok(typeof ids?.feedback_record_id === 'string' && typeof ids.feedback_response_id === 'string', `200 without ids: ${context()}`);
    const body = read as Record<string, any>;
    assert.equal(ids.status, body['response']['status'] ?? 'submitted', `200 with the wrong status: ${context()}`);
    tally.accepted++;
    totals.accepted++;
    accepted.push({ endpoint, body, recordId: ids.feedback_record_id, responseId: ids.feedback_response_id, seq: seq++ });
  }

  async function postJson(path: string, body: string, headers: Record<string, string> = authHeaders): Promise<Answer> {
    const res: HttpAnswer = await send(api.url, path, { headers, body, agent });
    return { status: res.status, headers: res.headers, text: res.text, json: res.json };
  }

  function expectRecord(body: unknown): Expect[] {
    return recordBodyProblems(body).length === 0 ? [OK] : [err('validation_failed')];
  }
  function expectResponse(body: unknown): Expect[] {
    if (responseBodyProblems(body).length > 0) return [err('validation_failed')];
    return pool.includes((body as { feedback_record_id: string }).feedback_record_id) ? [OK] : [err('record_not_found')];
  }

  function report(title: string, t: Tally, extra: Record<string, unknown> = {}): void {
    recordFuzz(title, { bad_inputs_tried: t.bad, accepted_valid: t.accepted, answers_4xx: t.s4xx, answers_5xx: t.s5xx, requests: t.tried, ...extra });
  }

  /** Checks the property built over a fresh tally, and records the tally under `title`, pass or fail. */
  async function fuzz<Ts extends [unknown, ...unknown[]]>(title: string, property: (t: Tally) => fc.IAsyncProperty<Ts>, params: fc.Parameters<Ts>): Promise<void> {
    const t: Tally = { tried: 0, bad: 0, accepted: 0, s4xx: 0, s5xx: 0 };
    try {
      await fc.assert(property(t), params);
    } finally {
      report(title, t);
    }
  }

  it('POST /feedback-record: valid bodies and one-mutation variants get 200 or the right 400', async function () {
    await fuzz(this.test!.fullTitle(), (t) =>
      fc.asyncProperty(validRecordBody, recordMutation, fc.boolean(), async (valid, m, valid200) => {
        // About one body in ten is left valid, so that acceptance is exercised but the store stays small.
        const body = applyMutation(valid, valid200 && m.kind === 'none' ? m : m.kind === 'none' ? { kind: 'length', path: 'record.feedback_dataset_id', size: 257 } : m);
        const sent = JSON.stringify(body);
        const read = JSON.parse(sent) as unknown;
        judge(t, `POST /feedback-record ${sent.slice(0, 600)}`, await postJson('/feedback-record', sent), expectRecord(read), 'record', read);
      }),
      { numRuns: 1500 },
    );
  });

  it('POST /feedback-response: valid bodies, mutations and unknown record ids get 200, 400 or 404', async function () {
    await fuzz(this.test!.fullTitle(), (t) =>
      fc.asyncProperty(validResponseBody(pool), responseMutation, fc.integer({ min: 0, max: 9 }), async (valid, m, dice) => {
        const body = applyMutation(valid, m.kind === 'none' && dice > 1 ? { kind: 'emptyValues', status: 'draft' } : m);
        const sent = JSON.stringify(body);
        const read = JSON.parse(sent) as unknown;
        judge(t, `POST /feedback-response ${sent.slice(0, 600)}`, await postJson('/feedback-response', sent), expectResponse(read), 'response', read);
      }),
      { numRuns: 1000 },
    );
  });

  it('both endpoints: any JSON value (non-objects, random objects, near-misses) gets a 400', async function () {
    const nearMiss = fc.record({ record: fc.oneof(anyJsonValue, fc.jsonValue({ maxDepth: 2 })), response: fc.oneof(anyJsonValue, fc.jsonValue({ maxDepth: 2 })) });
    await fuzz(this.test!.fullTitle(), (t) =>
      fc.asyncProperty(fc.oneof(fc.jsonValue({ maxDepth: 4 }), nearMiss, fc.dictionary(text(8), fc.jsonValue({ maxDepth: 2 }))), fc.boolean(), async (value, toRecord) => {
        const sent = JSON.stringify(value);
        const read = JSON.parse(sent) as unknown;
        if (toRecord) judge(t, `POST /feedback-record ${sent.slice(0, 600)}`, await postJson('/feedback-record', sent), expectRecord(read), 'record', read);
        else judge(t, `POST /feedback-response ${sent.slice(0, 600)}`, await postJson('/feedback-response', sent), expectResponse(read), 'response', read);
      }),
      { numRuns: 1000 },
    );
  });

  it('raw HTTP: odd methods, paths, auth, Content-Types and charsets, duplicated headers, bad JSON, empty and non-object bodies', async function () {
    await fuzz(this.test!.fullTitle(), (t) =>
      fc.asyncProperty(rawRequest(pool), async (r) => {
        const built = buildRaw(r);
        const answer = fromRaw(await rawExchange(api.port, built.head, built.body));
        const expected = expectRaw(r, pool);
        // Node trims the whitespace around header values.
        judge(t, `raw ${JSON.stringify(built.head)} body ${JSON.stringify(built.body.toString('utf8').slice(0, 300))}`, answer, expected.answers, expected.endpoint, expected.read, r.requestId?.replace(/^[ \t]+|[ \t]+$/g, ''));
      }),
      { numRuns: 2200 },
    );
  });

  it('big inputs: huge strings, many keys, bodies over the limit, nesting at and far beyond 32 levels', async function () {
    await fuzz(this.test!.fullTitle(), (t) =>
      fc.asyncProperty(bigInput, async (b) => {
        const built = bigBody(b);
        const head = [`POST /feedback-record HTTP/1.1`, 'Host: fuzz', `Authorization: Bearer ${LEDGER_KEY.secret}`, 'Content-Type: application/json', 'Connection: close', ...(b.chunked ? ['Transfer-Encoding: chunked'] : [`Content-Length: ${built.bytes.length}`])].join('\r\n');
        const answer = fromRaw(await rawExchange(api.port, head, b.chunked ? chunk(built.bytes) : built.bytes, 30_000));
        const over = built.bytes.length > BODY_LIMIT;
        const read = over ? undefined : (JSON.parse(built.bytes.toString('utf8')) as unknown);
        const expected = over ? [err('payload_too_large')] : expectRecord(read);
        judge(t, `big ${b.kind} (${built.bytes.length} bytes)`, answer, expected, 'record', read);
      }),
      { numRuns: 60 },
    );
  });

  // The next three are what a 200 must not do: store something other than what was sent.

  it('invalid UTF-8 in a body is refused (400 invalid_json), not stored with replacement characters', async function () {
    const invalid = fc.constantFrom([0xff], [0xfe], [0xc3], [0xe2, 0x82], [0xed, 0xa0, 0x80], [0xc0, 0xaf], [0xf8, 0x88, 0x80, 0x80, 0x80], [0x80], [0xf4, 0x90, 0x80, 0x80]);
    await fuzz(this.test!.fullTitle(), (t) =>
      fc.asyncProperty(validRecordBody, invalid, fc.boolean(), async (valid, bytes, inKey) => {
        const marker = '@@INVALID@@';
        const body = structuredClone(valid);
        (body['record']['field_to_value'] as Record<string, unknown>)[inKey ? `k${marker}` : 'text'] = inKey ? 1 : `a${marker}b`;
        const [before, after] = JSON.stringify(body).split(marker) as [string, string];
        const bytes2 = Buffer.concat([Buffer.from(before), Buffer.from(bytes), Buffer.from(after)]);
        const head = ['POST /feedback-record HTTP/1.1', 'Host: fuzz', `Authorization: Bearer ${LEDGER_KEY.secret}`, 'Content-Type: application/json; charset=utf-8', `Content-Length: ${bytes2.length}`, 'Connection: close'].join('\r\n');
        const answer = fromRaw(await rawExchange(api.port, head, bytes2));
        judge(t, `invalid UTF-8 ${JSON.stringify(bytes)} in a ${inKey ? 'key' : 'string'}: ${bytes2.toString('latin1').slice(0, 300)}`, answer, [err('invalid_json')], 'record', undefined);
      }),
      { numRuns: 150, endOnFailure: true },
    );
  });

  it('strings with lone surrogates (valid JSON escapes, not storable as UTF-8) are refused, not stored altered', async function () {
    const lone = fc.constantFrom('\\ud800', '\\udbff', '\\udc00', '\\udfff', 'x\\ud83d', '\\ude00y');
    await fuzz(this.test!.fullTitle(), (t) =>
      fc.asyncProperty(validRecordBody, lone, fc.constantFrom('value', 'key', 'dataset'), async (valid, esc, where) => {
        const marker = '@@LONE@@';
        const body = structuredClone(valid);
        if (where === 'value') (body['record']['field_to_value'] as Record<string, unknown>)['text'] = marker;
        else if (where === 'key') (body['response']['values'] as Record<string, unknown>)[`k${marker}`] = 1;
        else body['record']['feedback_dataset_id'] = marker;
        const sent = JSON.stringify(body).replace(marker, esc);
        const read = JSON.parse(sent) as unknown;
        judge(t, `lone surrogate in ${where}: ${sent.slice(0, 300)}`, await postJson('/feedback-record', sent), [err('validation_failed'), err('invalid_json')], 'record', read);
      }),
      { numRuns: 100, endOnFailure: true },
    );
  });

  it('numbers beyond the double range (1e400) are refused, not stored as null', async function () {
    await fuzz(this.test!.fullTitle(), (t) =>
      fc.asyncProperty(validRecordBody, fc.constantFrom('1e400', '-1e400', '1e309', '123456789e999', '-0.5e99999'), async (valid, num) => {
        const marker = '"@@NUM@@"';
        const body = structuredClone(valid);
        (body['response']['values'] as Record<string, unknown>)['score'] = '@@NUM@@';
        const sent = JSON.stringify(body).replace(marker, num);
        const read = JSON.parse(sent) as unknown;
        judge(t, `number ${num}: ${sent.slice(0, 300)}`, await postJson('/feedback-record', sent), [err('validation_failed'), err('invalid_json')], 'record', read);
      }),
      { numRuns: 50, endOnFailure: true },
    );
  });

  it('malformed HTTP (conflicting Content-Length, TE+CL, bad header bytes, huge headers) gets a 4xx in the documented error shape', async function () {
    const body = Buffer.from(JSON.stringify({ record: { feedback_dataset_id: 'd', field_to_value: { a: 1 } }, response: { values: { a: 1 } } }));
    const auth = `Authorization: Bearer ${LEDGER_KEY.secret}`;
    const heads: Record<string, string> = {
      'two different Content-Length': `Content-Type: application/json\r\nContent-Length: ${body.length}\r\nContent-Length: ${body.length + 1}`,
      'Transfer-Encoding and Content-Length': `Content-Type: application/json\r\nTransfer-Encoding: chunked\r\nContent-Length: ${body.length}`,
      'control byte in a header value': `Content-Type: application/json\r\nX-Odd: a\u0001b\r\nContent-Length: ${body.length}`,
      'space before the colon': `Content-Type : application/json\r\nContent-Length: ${body.length}`,
      'obsolete line folding': `Content-Type: application/json\r\n  folded\r\nContent-Length: ${body.length}`,
      'headers over 16 KiB': `Content-Type: application/json\r\nX-Pad: ${'p'.repeat(20_000)}\r\nContent-Length: ${body.length}`,
      'non-numeric Content-Length': `Content-Type: application/json\r\nContent-Length: 12abc`,
    };
    await fuzz(this.test!.fullTitle(), (t) =>
      fc.asyncProperty(fc.constantFrom(...Object.keys(heads)), fc.constantFrom('/feedback-record', '/feedback-response'), async (name, path) => {
        const head = `POST ${path} HTTP/1.1\r\nHost: fuzz\r\n${auth}\r\n${heads[name]!}\r\nConnection: close`;
        const answer = fromRaw(await rawExchange(api.port, head, body));
        t.tried++;
        t.bad++;
        totals.tried++;
        totals.bad++;
        if (answer.status >= 500) t.s5xx++;
        else if (answer.status >= 400) t.s4xx++;
        assert.ok(answer.status >= 400 && answer.status < 500, `${name}: answered ${answer.status}`);
        assert.ok(errorShape(answer.json) !== undefined, `${name}: answered ${answer.status} with body ${JSON.stringify(answer.text)} (not the documented error shape, no X-Request-Id: Node's own reply to a parse error)`);
      }),
      { numRuns: 40, endOnFailure: true },
    );
  });

  it('slow clients: a slowloris (headers byte by byte) and a slow body are cut off by the server', async function () {
    // HTTP_HEADERS_TIMEOUT_MS=1000 and HTTP_REQUEST_TIMEOUT_MS=3000 on this API. The clients keep
    // trickling for up to 5 × the request timeout; the server must close them before that.
    const trickle = (first: string, next: string) =>
      new Promise<{ closedByServer: boolean; bytesSent: number; answer: string }>((resolve) => {
        const socket = connect(api.port, '127.0.0.1');
        let answer = '';
        let bytesSent = 0;
        const started = Date.now();
        socket.on('data', (d: Buffer) => (answer += d.toString('latin1')));
        socket.on('error', () => undefined);
        socket.write(first);
        const timer = setInterval(() => {
          if (Date.now() - started > 15_000) {
            clearInterval(timer);
            socket.destroy();
            resolve({ closedByServer: false, bytesSent, answer });
            return;
          }
          if (!socket.destroyed && socket.writable) {
            socket.write(next);
            bytesSent++;
          }
        }, 100);
        socket.on('close', () => {
          clearInterval(timer);
          resolve({ closedByServer: Date.now() - started <= 15_000, bytesSent, answer });
        });
      });
    const [headers, slowBody] = await Promise.all([
      trickle(`POST /feedback-record HTTP/1.1\r\nHost: slow\r\nX-Slow: `, 'a'),
      trickle(`POST /feedback-record HTTP/1.1\r\nHost: slow\r\nAuthorization: Bearer ${LEDGER_KEY.secret}\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"record":`, ' '),
    ]);
    recordFuzz(this.test!.fullTitle(), { bad_inputs_tried: 2, accepted_valid: 0, answers_4xx: [headers, slowBody].filter((x) => /^HTTP\/1\.1 4/.test(x.answer)).length, answers_5xx: 0, slowloris_bytes_before_close: headers.bytesSent, slow_body_bytes_before_close: slowBody.bytesSent });
    assert.ok(headers.closedByServer, `a client sending headers byte by byte was still connected after 15 s (${headers.bytesSent} bytes); HTTP_HEADERS_TIMEOUT_MS is 1000`);
    assert.ok(slowBody.closedByServer, `a client sending its body byte by byte was still connected after 15 s (${slowBody.bytesSent} bytes); HTTP_REQUEST_TIMEOUT_MS is 3000`);
  });

  it('every body answered 200 is stored unchanged', async function () {
    await until(async () => ((await cluster.pendingJobs()) === 0 ? true : undefined), 120_000, 'the queue to drain', 250);
    const db = cluster.db();
    const problems: string[] = [];
    let checked = 0;
    // Responses: per (record, annotator) the last one accepted (the properties send one at a time).
    const lastPerResponse = new Map<string, Accepted>();
    for (const a of accepted) lastPerResponse.set(a.responseId, a);
    for (const a of accepted) {
      if (a.endpoint === 'record') {
        const doc = await db.collection('feedback_records').findOne({ _id: a.recordId as never });
        const rec = a.body['record'] as Record<string, unknown>;
        if (doc === null) problems.push(`record ${a.recordId} answered 200 is not stored: ${JSON.stringify(a.body).slice(0, 300)}`);
        else {
          for (const k of ['feedback_dataset_id', 'field_to_value', 'external_id', 'metadata']) {
            const d = firstDifference(doc[k], rec[k], k);
            if (d !== undefined) problems.push(`record ${a.recordId}: ${d}; sent ${JSON.stringify(rec[k])?.slice(0, 1000)}`);
          }
          checked++;
        }
      }
      if (lastPerResponse.get(a.responseId) !== a) continue;
      const doc = await db.collection('feedback_responses').findOne({ _id: a.responseId as never });
      const r = a.body['response'] as Record<string, unknown>;
      if (doc === null) problems.push(`response ${a.responseId} answered 200 is not stored: ${JSON.stringify(a.body).slice(0, 300)}`);
      else {
        const d = firstDifference(doc['values'], r['values'], 'values');
        if (d !== undefined) problems.push(`response ${a.responseId}: ${d}; sent ${JSON.stringify(r['values']).slice(0, 1000)}`);
        if (doc['status'] !== (r['status'] ?? 'submitted')) problems.push(`response ${a.responseId}: status ${String(doc['status'])}`);
        if (doc['user_id'] !== (r['user_id'] ?? LEDGER_KEY.name)) problems.push(`response ${a.responseId}: user_id ${String(doc['user_id'])}`);
        checked++;
      }
    }
    const letters = await cluster.deadLetters();
    recordFuzz(this.test!.fullTitle(), { bad_inputs_tried: 0, accepted_valid: accepted.length, answers_4xx: 0, answers_5xx: 0, documents_compared: checked, mismatches: problems.length });
    assert.ok(accepted.length > 50, `only ${accepted.length} valid bodies were accepted: the generators do not exercise acceptance`);
    assert.deepEqual(problems.slice(0, 30), [], `${problems.length} accepted bodies are not stored as sent (fast-check seed ${SEED})`);
    // The store takes every body the API accepts (lists inside lists, NUL in strings included).
    assert.deepEqual(letters.map((l) => `${String(l['reason'])}: ${String(l['error']).slice(0, 200)}`), []);
  });

  it('the API stayed up: no 5xx, no unhandled error or rejection logged, nothing written outside the logger', async function () {
    const res = await send(api.url, '/healthz', { method: 'GET' });
    recordFuzz(this.test!.fullTitle(), { bad_inputs_tried: 0, accepted_valid: 0, answers_4xx: 0, answers_5xx: totals.s5xx, total_requests: totals.tried, total_bad_inputs: totals.bad });
    assert.equal(res.status, 200);
    assert.ok(api.alive() && worker.alive(), 'a process died');
    for (const p of [api, worker]) {
      const bad = p.lines.filter((l) => l.json === undefined ? l.raw.trim() !== '' : /unhandled/i.test(String(l.json['msg'])) || l.json['level'] === 'error' || l.json['level'] === 'fatal');
      assert.deepEqual(bad.slice(0, 10).map((l) => l.raw.slice(0, 300)), [], `${p.name} logged ${bad.length} error or raw line(s)`);
    }
    assert.ok(!api.lines.some(msg('unhandled rejection')));
    assert.equal(totals.s5xx, 0);
    assert.ok(totals.bad >= 5000, `only ${totals.bad} bad or odd inputs were tried`);
  });
});

// ---------------------------------------------------------------------------------------------
// Raw requests

const AUTHS = ['valid', 'valid', 'valid', 'valid', 'valid', 'valid', 'lowercase', 'spaces', 'missing', 'basic', 'empty', 'wrong', 'long', 'nonascii', 'dup-valid-first', 'dup-wrong-first'] as const;
type AuthKind = (typeof AUTHS)[number];

/** Content-Types with how the API must read them: as JSON (any charset: JSON is UTF-8, RFC 8259), refuse (415), or either. */
const CONTENT_TYPES: readonly (readonly [string | undefined | readonly string[], 'json' | 'refuse' | 'either'])[] = [
  [undefined, 'json'],
  [undefined, 'json'],
  ['', 'json'],
  ['application/json', 'json'],
  ['application/json', 'json'],
  ['application/json', 'json'],
  ['application/json; charset=utf-8', 'json'],
  ['application/json;charset=UTF-8', 'json'],
  ['Application/JSON', 'json'],
  ['application/vnd.api+json', 'json'],
  ['application/merge-patch+json; charset=utf-8', 'json'],
  ['application/json; charset=latin1', 'json'],
  ['application/json; charset=utf-16', 'json'],
  ['application/json; charset=x-no-such-charset', 'json'],
  ['text/plain', 'refuse'],
  ['text/json', 'refuse'],
  ['application/x-www-form-urlencoded', 'refuse'],
  ['multipart/form-data; boundary=xyz', 'refuse'],
  ['application/jsonx', 'refuse'],
  ['application/json-seq', 'refuse'],
  ['application/xml', 'refuse'],
  ['*/*', 'either'],
  [['text/plain', 'application/json'], 'refuse'],
  [['application/json', 'text/plain'], 'json'],
];

const PATHS: readonly (readonly [string, 'record' | 'response' | 'unknown' | 'record?' | 'response?' | 'read'])[] = [
  ['/feedback-record', 'record'],
  ['/feedback-record', 'record'],
  ['/feedback-record', 'record'],
  ['/feedback-record', 'record'],
  ['/feedback-response', 'response'],
  ['/feedback-response', 'response'],
  ['/feedback-response', 'response'],
  ['/feedback-record?x=1', 'record'],
  ['/feedback-record/', 'record?'],
  ['/FEEDBACK-RECORD', 'record?'],
  ['/Feedback-Response', 'response?'],
  ['/', 'unknown'],
  ['/feedback-records', 'unknown'],
  // GET /feedback-record/{id} (the read side): a known path, so other methods are 405.
  ['/feedback-record/x', 'read'],
  ['/feedback', 'unknown'],
  ['/healthz/x', 'unknown'],
];

type BodyKind = 'valid' | 'mutated' | 'invalid' | 'empty' | 'whitespace' | 'scalar' | 'bom';

interface RawRequest {
  readonly method: string;
  readonly path: (typeof PATHS)[number];
  readonly auth: AuthKind;
  readonly contentType: (typeof CONTENT_TYPES)[number];
  readonly bodyKind: BodyKind;
  readonly bodyText: string;
  readonly chunked: boolean;
  readonly requestId: string | undefined;
  readonly idempotency: 'none' | 'valid' | 'empty' | 'long' | 'tab' | 'dup';
}

const INVALID_JSON = [
  '{',
  '{"record":',
  "{'record': {}}",
  '{"record": {},}',
  '{record: 1}',
  'NaN',
  '[1,]',
  '{"a": 1} trailing',
  '{"a": "unterminated}',
  '{"a": "\\x41"}',
  '{"a": 01}',
  '/* comment */ {}',
  '{"a": undefined}',
  '\u0000{}',
  '{"a":1}{"b":2}',
  '"\\ud800',
];
const SCALARS = ['3', '"string"', 'null', 'true', 'false', '[]', '[{"record": {}}]', '-0', '1e5', '""'];

function rawRequest(pool: readonly string[]): fc.Arbitrary<RawRequest> {
  const jsonBody = fc.oneof(
    fc.tuple(fc.constant<BodyKind>('valid'), fc.oneof(validRecordBody, validResponseBody(pool)).map((b) => JSON.stringify(b))),
    { weight: 2, arbitrary: fc.tuple(fc.constant<BodyKind>('mutated'), fc.oneof(fc.tuple(validRecordBody, recordMutation), fc.tuple(validResponseBody(pool), responseMutation)).map(([b, m]) => JSON.stringify(applyMutation(b, m)))) },
    { weight: 2, arbitrary: fc.tuple(fc.constant<BodyKind>('invalid'), fc.oneof(fc.constantFrom(...INVALID_JSON), validRecordBody.map((b) => JSON.stringify(b).slice(0, -3)))) },
    fc.tuple(fc.constant<BodyKind>('empty'), fc.constant('')),
    fc.tuple(fc.constant<BodyKind>('whitespace'), fc.constantFrom(' ', '\n', '\t \r\n ')),
    fc.tuple(fc.constant<BodyKind>('scalar'), fc.constantFrom(...SCALARS)),
    fc.tuple(fc.constant<BodyKind>('bom'), validRecordBody.map((b) => `\uFEFF${JSON.stringify(b)}`)),
  );
  return fc.record({
    method: fc.constantFrom('POST', 'POST', 'POST', 'POST', 'POST', 'POST', 'POST', 'POST', 'GET', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'),
    path: fc.constantFrom(...PATHS),
    auth: fc.constantFrom(...AUTHS),
    contentType: fc.constantFrom(...CONTENT_TYPES),
    body: jsonBody,
    chunked: fc.boolean(),
    requestId: fc.option(fc.oneof(fc.string({ unit: 'binary-ascii', minLength: 1, maxLength: 30 }).filter((s) => /^[\x20-\x7e\t]+$/.test(s)), fc.constant('r'.repeat(201)), fc.constant('has space'), fc.constant('é-latin1')), { nil: undefined }),
    idempotency: fc.constantFrom('none', 'none', 'none', 'none', 'valid', 'valid', 'empty', 'long', 'tab', 'dup'),
  }).map(({ body: [bodyKind, bodyText], ...rest }) => ({ ...rest, bodyKind, bodyText }));
}

function authLines(kind: AuthKind): string[] {
  const s = LEDGER_KEY.secret;
  switch (kind) {
    case 'valid':
      return [`Authorization: Bearer ${s}`];
    case 'lowercase':
      return [`Authorization: bearer ${s}`];
    case 'spaces':
      return [`Authorization: Bearer    ${s}   `];
    case 'missing':
      return [];
    case 'basic':
      return ['Authorization: Basic dXNlcjpwYXNzd29yZA=='];
    case 'empty':
      return ['Authorization: Bearer '];
    case 'wrong':
      return ['Authorization: Bearer not-a-key-0000000000'];
    case 'long':
      return [`Authorization: Bearer ${'x'.repeat(5000)}`];
    case 'nonascii':
      return [`Authorization: Bearer t\u00f6ken-${s}`];
    case 'dup-valid-first':
      return [`Authorization: Bearer ${s}`, 'Authorization: Bearer not-a-key-0000000000'];
    case 'dup-wrong-first':
      return ['Authorization: Bearer not-a-key-0000000000', `Authorization: Bearer ${s}`];
  }
}

let idemCounter = 0;

function buildRaw(r: RawRequest): { head: string; body: Buffer } {
  const body = Buffer.from(r.bodyText, 'utf8');
  const lines = [`${r.method} ${r.path[0]} HTTP/1.1`, 'Host: fuzz', ...authLines(r.auth)];
  const ct = r.contentType[0];
  if (typeof ct === 'string') lines.push(`Content-Type: ${ct}`);
  else if (ct !== undefined) for (const c of ct) lines.push(`Content-Type: ${c}`);
  if (r.requestId !== undefined) lines.push(`X-Request-Id: ${r.requestId}`);
  const key = `fuzz-${process.pid}-${idemCounter++}`;
  if (r.idempotency === 'valid') lines.push(`Idempotency-Key: ${key}`);
  else if (r.idempotency === 'empty') lines.push('Idempotency-Key: ');
  else if (r.idempotency === 'long') lines.push(`Idempotency-Key: ${'k'.repeat(256)}`);
  else if (r.idempotency === 'tab') lines.push('Idempotency-Key: a\tb');
  else if (r.idempotency === 'dup') lines.push(`Idempotency-Key: ${key}-a`, `Idempotency-Key: ${key}-b`);
  lines.push(r.chunked ? 'Transfer-Encoding: chunked' : `Content-Length: ${body.length}`, 'Connection: close');
  return { head: lines.join('\r\n'), body: r.chunked ? chunk(body) : body };
}

function chunk(body: Buffer): Buffer {
  const parts: Buffer[] = [];
  for (let i = 0; i < body.length; i += 7000) {
    const piece = body.subarray(i, i + 7000);
    parts.push(Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from('\r\n'));
  }
  parts.push(Buffer.from('0\r\n\r\n'));
  return Buffer.concat(parts);
}

/** What the API must answer to a raw request, following the order its middleware runs in. */
function expectRaw(r: RawRequest, pool: readonly string[]): { answers: Expect[]; endpoint: 'record' | 'response' | undefined; read: unknown } {
  const [, route] = r.path;
  if (route === 'unknown') return { answers: [err('not_found')], endpoint: undefined, read: undefined };
  if (route === 'read') {
    const none = { endpoint: undefined, read: undefined };
    if (r.method === 'OPTIONS') return { answers: [OK, { status: 204 }], ...none };
    if (r.method !== 'GET') return { answers: [err('method_not_allowed')], ...none };
    if (r.auth === 'missing' || r.auth === 'basic' || r.auth === 'empty' || r.auth === 'nonascii') return { answers: [err('unauthorized')], ...none };
    if (r.auth === 'wrong' || r.auth === 'long' || r.auth === 'dup-wrong-first') return { answers: [err('invalid_api_key')], ...none };
    // A write-only key: 403; a key with the read scope: "x" is no id this service minted.
    return { answers: [err('forbidden'), err('record_not_found')], ...none };
  }
  const endpoint = route.startsWith('record') ? 'record' : 'response';
  const alternatives: Expect[] = route.endsWith('?') ? [err('not_found')] : [];
  if (r.method === 'OPTIONS') return { answers: [...alternatives, OK, { status: 204 }], endpoint: undefined, read: undefined };
  if (r.method !== 'POST') return { answers: [...alternatives, err('method_not_allowed')], endpoint: undefined, read: undefined };
  const auth = r.auth;
  if (auth === 'missing' || auth === 'basic' || auth === 'empty' || auth === 'nonascii') return { answers: [...alternatives, err('unauthorized')], endpoint: undefined, read: undefined };
  if (auth === 'wrong' || auth === 'long' || auth === 'dup-wrong-first') return { answers: [...alternatives, err('invalid_api_key')], endpoint: undefined, read: undefined };
  const [, ctClass] = r.contentType;
  // With Content-Length: 0 there is no body to type (type-is), so an empty body is 400 or 415.
  const noBody = !r.chunked && r.bodyText === '';
  if (ctClass === 'refuse') return { answers: [...alternatives, err('unsupported_media_type'), ...(noBody ? [err('invalid_json')] : [])], endpoint: undefined, read: undefined };
  const extra: Expect[] = ctClass === 'either' ? [err('unsupported_media_type')] : [];
  const bodyAnswers = (): { answers: Expect[]; read: unknown } => {
    let text = r.bodyText;
    let bomAlternative: Expect[] = [];
    if (r.bodyKind === 'bom') {
      text = text.slice(1);
      bomAlternative = [err('invalid_json')];
    }
    if (text.trim() === '') return { answers: [err('invalid_json')], read: undefined };
    let read: unknown;
    try {
      read = JSON.parse(text);
    } catch {
      return { answers: [err('invalid_json')], read: undefined };
    }
    const problems = endpoint === 'record' ? recordBodyProblems(read) : responseBodyProblems(read);
    if (problems.length > 0) return { answers: [err('validation_failed'), ...bomAlternative], read };
    if (endpoint === 'response' && !pool.includes((read as { feedback_record_id: string }).feedback_record_id)) return { answers: [err('record_not_found'), ...bomAlternative], read };
    // Two headers: Node would join them into one key ("a, b"); the API refuses instead.
    if (r.idempotency === 'empty' || r.idempotency === 'long' || r.idempotency === 'tab' || r.idempotency === 'dup') return { answers: [err('invalid_header'), ...bomAlternative], read };
    return { answers: [OK, ...bomAlternative], read };
  };
  const b = bodyAnswers();
  return { answers: [...alternatives, ...extra, ...b.answers], endpoint, read: b.read };
}

// ---------------------------------------------------------------------------------------------
// Big inputs

interface BigInput {
  readonly kind: 'bigString' | 'longDatasetId' | 'manyKeys' | 'overLimit' | 'depth' | 'deepArrays' | 'deepObjects';
  readonly size: number;
  readonly chunked: boolean;
}

const bigInput: fc.Arbitrary<BigInput> = fc.oneof(
  fc.record({ kind: fc.constant('bigString' as const), size: fc.integer({ min: 100_000, max: 900_000 }), chunked: fc.boolean() }),
  fc.record({ kind: fc.constant('longDatasetId' as const), size: fc.integer({ min: 257, max: 300_000 }), chunked: fc.boolean() }),
  fc.record({ kind: fc.constant('manyKeys' as const), size: fc.integer({ min: 1_000, max: 20_000 }), chunked: fc.boolean() }),
  fc.record({ kind: fc.constant('overLimit' as const), size: fc.integer({ min: 1, max: 200_000 }), chunked: fc.boolean() }),
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('depth' as const), size: fc.integer({ min: 30, max: 34 }), chunked: fc.constant(false) }) },
  fc.record({ kind: fc.constant('deepArrays' as const), size: fc.integer({ min: 1_000, max: 200_000 }), chunked: fc.boolean() }),
  fc.record({ kind: fc.constant('deepObjects' as const), size: fc.integer({ min: 1_000, max: 100_000 }), chunked: fc.boolean() }),
);

function bigBody(b: BigInput): { bytes: Buffer } {
  const base = { record: { feedback_dataset_id: 'big', field_to_value: { q: 'x' } as Record<string, unknown> }, response: { values: { v: 1 } as Record<string, unknown> } };
  switch (b.kind) {
    case 'bigString':
      base.record.field_to_value['big'] = 'é'.repeat(Math.floor(b.size / 2));
      break;
    case 'longDatasetId':
      (base.record as Record<string, unknown>)['feedback_dataset_id'] = 'd'.repeat(b.size);
      break;
    case 'manyKeys':
      for (let i = 0; i < b.size; i++) base.response.values[`key_${i}`] = i;
      break;
    case 'overLimit': {
      base.record.field_to_value['pad'] = '';
      const without = Buffer.byteLength(JSON.stringify(base));
      base.record.field_to_value['pad'] = 'p'.repeat(BODY_LIMIT - without + b.size);
      break;
    }
    case 'depth': {
      // field_to_value is level 3; `size` is the total container depth of the body.
      let v: unknown = 'leaf';
      for (let level = b.size; level > 2; level--) v = { d: v };
      base.record.field_to_value = v as Record<string, unknown>;
      break;
    }
    case 'deepArrays':
      return { bytes: Buffer.from(`{"record":{"feedback_dataset_id":"d","field_to_value":{"a":${'['.repeat(b.size)}${']'.repeat(b.size)}}},"response":{"values":{"v":1}}}`) };
    case 'deepObjects':
      return { bytes: Buffer.from(`{"record":{"feedback_dataset_id":"d","field_to_value":${'{"a":'.repeat(b.size)}1${'}'.repeat(b.size)}},"response":{"values":{"v":1}}}`) };
  }
  return { bytes: Buffer.from(JSON.stringify(base)) };
}
