import { expect } from 'chai';
import type { IncomingMessage } from 'node:http';
import { testConfig, TEST_KEY } from '../helpers/env.js';
import { recordBody, startStack, type Stack } from '../helpers/stack.js';

const LIMIT = 2048;
const HEADERS = { Authorization: `Bearer ${TEST_KEY.secret}`, 'Content-Type': 'application/json' } as const;

/** A valid /feedback-record body of exactly `bytes` bytes of JSON: only its size is wrong. */
function bodyOfBytes(bytes: number): string {
  const padded = (pad: string) => JSON.stringify(recordBody({ response: { values: { helpful: 1, pad } } }));
  const text = padded('p'.repeat(bytes - Buffer.byteLength(padded(''))));
  expect(Buffer.byteLength(text)).to.equal(bytes);
  return text;
}

/** The body sent without Content-Length (Transfer-Encoding: chunked), in 1 KiB chunks. */
function chunked(text: string): ReadableStream<Uint8Array> {
  const bytes = Buffer.from(text);
  let offset = 0;
  return new ReadableStream({
    pull(controller) {
      if (offset >= bytes.length) controller.close();
      else {
        controller.enqueue(bytes.subarray(offset, offset + 1024));
        offset += 1024;
      }
    },
  });
}

type Framing = 'content-length' | 'chunked';

interface Outcome {
  readonly status: number | string;
  readonly code: unknown;
  readonly connection: string | null;
}

/**
 * One POST with Node's own fetch (undici: keep-alive, pooled connections, as a client library
 * would). A network error is returned as its cause's code (ECONNRESET…), not thrown, so that a
 * run reports every request's fate.
 */
async function send(stack: Stack, text: string, framing: Framing): Promise<Outcome> {
  try {
    const init = framing === 'chunked' ? { body: chunked(text), duplex: 'half' } : { body: text };
    const res = await fetch(`${stack.baseUrl}/feedback-record`, { method: 'POST', headers: HEADERS, ...init } as RequestInit);
    const body = (await res.json().catch(() => undefined)) as { error?: { code?: unknown } } | undefined;
    return { status: res.status, code: body?.error?.code, connection: res.headers.get('connection') };
  } catch (err) {
    const cause = (err as { cause?: { code?: unknown } }).cause;
    return { status: String(cause?.code ?? (err as Error).message), code: undefined, connection: null };
  }
}

const REFUSED: Outcome = { status: 413, code: 'payload_too_large', connection: 'close' };

describe('413 payload_too_large on keep-alive connections', function () {
  this.timeout(60_000);
  let stack: Stack;
  /** The client port of the connection each request arrived on, in arrival order. */
  let clientPorts: number[] = [];

  before(async () => {
    stack = await startStack(testConfig({ BODY_LIMIT_BYTES: String(LIMIT) }), { worker: false });
    stack.api.server.on('request', (req: IncomingMessage) => clientPorts.push(req.socket.remotePort ?? -1));
  });
  beforeEach(() => {
    clientPorts = [];
  });

  /** Each oversize request came on a connection of its own: none was reused after a 413. */
  const expectOneConnectionEach = (requests: number) => {
    expect(clientPorts).to.have.length(requests);
    expect(new Set(clientPorts).size, `client ports ${clientPorts.join(', ')}`).to.equal(requests);
  };
  after(async () => {
    await stack?.close();
  });

  const sizes = [
    ['just over the limit', LIMIT + 1],
    ['20x the limit', 20 * LIMIT],
    // Well past what one read of the socket holds, still under the discard bound (1 MiB).
    ['256x the limit', 256 * LIMIT],
  ] as const;

  for (const framing of ['content-length', 'chunked'] as const) {
    for (const [what, bytes] of sizes) {
      it(`6 in a row, ${what}, ${framing}: each answered 413 with Connection: close, none reset`, async () => {
        const text = bodyOfBytes(bytes);
        const outcomes: Outcome[] = [];
        for (let i = 0; i < 6; i += 1) outcomes.push(await send(stack, text, framing));
        expect(outcomes).to.deep.equal(Array.from({ length: 6 }, () => REFUSED));
        expectOneConnectionEach(6);
        const valid = await stack.post('/feedback-record', recordBody());
        expect(valid.status, valid.text).to.equal(200);
      });

      it(`8 at once, ${what}, ${framing}: each answered 413, none reset`, async () => {
        const text = bodyOfBytes(bytes);
        const outcomes = await Promise.all(Array.from({ length: 8 }, () => send(stack, text, framing)));
        expect(outcomes).to.deep.equal(Array.from({ length: 8 }, () => REFUSED));
        expectOneConnectionEach(8);
        const valid = await stack.post('/feedback-record', recordBody());
        expect(valid.status, valid.text).to.equal(200);
      });
    }
  }

  it('oversize and valid requests interleaved on the same pool: every answer is the right one', async () => {
    const big = bodyOfBytes(20 * LIMIT);
    const small = JSON.stringify(recordBody());
    for (let i = 0; i < 4; i += 1) {
      expect(await send(stack, big, i % 2 === 0 ? 'content-length' : 'chunked')).to.deep.equal(REFUSED);
      const ok = await send(stack, small, 'content-length');
      expect(ok.status).to.equal(200);
      expect(ok.connection).to.not.equal('close');
    }
  });
});
