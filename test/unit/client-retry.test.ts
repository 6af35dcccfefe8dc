import { expect } from 'chai';
import { ndjsonValues } from '../../client/ndjson.js';
import { DEFAULT_RETRY_POLICY, isRetryable, nextStep, parseRetryAfter, retryDelayMs, type AttemptOutcome, type RetryPolicy } from '../../client/retry.js';

/** The client's retry policy (pure logic): what is retried, how long it waits, when it gives up. */

const policy: RetryPolicy = { maxAttempts: 5, baseDelayMs: 100, maxDelayMs: 1000 };
const status = (s: number, code?: string, retryAfterMs?: number): AttemptOutcome => ({ kind: 'status', status: s, code, retryAfterMs });

describe('client retry policy', () => {
  it('retries what may succeed later (no answer, timeout, 503, 502, 504, 429, 409 idempotency_key_in_use) and nothing else', () => {
    for (const o of [{ kind: 'network' } as const, { kind: 'timeout' } as const, status(503, 'queue_unavailable'), status(503, 'overloaded'), status(502), status(504), status(429, 'rate_limited'), status(409, 'idempotency_key_in_use')]) {
      expect(isRetryable(o), JSON.stringify(o)).to.equal(true);
    }
    for (const o of [status(400, 'validation_failed'), status(401, 'invalid_api_key'), status(403, 'forbidden'), status(404, 'record_not_found'), status(409, 'idempotency_key_reused'), status(413, 'payload_too_large'), status(415), status(500, 'internal_error')]) {
      expect(isRetryable(o), JSON.stringify(o)).to.equal(false);
    }
  });

  it('backs off exponentially with full jitter, capped at maxDelayMs', () => {
    expect(retryDelayMs(1, { kind: 'network' }, policy, () => 0.999999)).to.be.closeTo(100, 0.01);
    expect(retryDelayMs(2, { kind: 'network' }, policy, () => 0.999999)).to.be.closeTo(200, 0.01);
    expect(retryDelayMs(4, { kind: 'network' }, policy, () => 0.999999)).to.be.closeTo(800, 0.01);
    expect(retryDelayMs(5, { kind: 'network' }, policy, () => 0.999999)).to.be.closeTo(1000, 0.01);
    expect(retryDelayMs(30, { kind: 'network' }, policy, () => 0.5)).to.equal(500);
    expect(retryDelayMs(3, { kind: 'network' }, policy, () => 0)).to.equal(0);
  });

  it('never retries before Retry-After, even above maxDelayMs, and spreads retries after it by up to one base delay', () => {
    const once = status(503, 'queue_unavailable', 3000);
    expect(retryDelayMs(1, once, policy, () => 0)).to.equal(3000);
    expect(retryDelayMs(1, once, policy, () => 0.5)).to.equal(3050);
    // The backoff is larger than Retry-After: the backoff wins.
    expect(retryDelayMs(5, status(429, 'rate_limited', 10), policy, () => 0.999)).to.be.greaterThan(990);
  });

  it('stops at maxAttempts, at the call budget, and at once on a final answer', () => {
    const random = () => 0.5;
    expect(nextStep({ attempt: 1, outcome: status(503), policy, remainingMs: 10_000, random })).to.deep.equal({ retry: true, delayMs: 50 });
    expect(nextStep({ attempt: 5, outcome: status(503), policy, remainingMs: 10_000, random })).to.deep.equal({ retry: false, reason: 'attempts' });
    expect(nextStep({ attempt: 1, outcome: status(503, undefined, 5000), policy, remainingMs: 4000, random })).to.deep.equal({ retry: false, reason: 'deadline' });
    expect(nextStep({ attempt: 1, outcome: status(400, 'validation_failed'), policy, remainingMs: 10_000, random })).to.deep.equal({ retry: false, reason: 'final' });
    expect(DEFAULT_RETRY_POLICY.maxAttempts).to.be.greaterThan(1);
  });

  it('reads Retry-After as seconds or an HTTP-date, and ignores anything else', () => {
    const now = Date.parse('2026-11-23T21:00:00Z');
    expect(parseRetryAfter('1', now)).to.equal(1000);
    expect(parseRetryAfter(' 42 ', now)).to.equal(42_000);
    expect(parseRetryAfter('Mon, 23 Nov 2026 21:00:05 GMT', now)).to.equal(5000);
    expect(parseRetryAfter('Mon, 23 Nov 2026 20:00:00 GMT', now), 'a date in the past: at once').to.equal(0);
    for (const bad of [null, undefined, '', '-1', '1.5', 'soon', '12345678901']) expect(parseRetryAfter(bad, now), String(bad)).to.equal(undefined);
  });
});

describe('client NDJSON reader', () => {
  async function collect(chunks: string[] | Uint8Array[]): Promise<unknown[]> {
    const bytes = chunks.map((c) => (typeof c === 'string' ? new TextEncoder().encode(c) : c));
    async function* source() {
      yield* bytes;
    }
    const out: unknown[] = [];
    for await (const v of ndjsonValues(source())) out.push(v);
    return out;
  }

  it('joins lines and multi-byte characters cut across chunks, skips blank lines, reads a last line without newline', async () => {
    const text = new TextEncoder().encode('{"a":"é"}\n\n{"b":2}\n{"c":3}');
    const cut = [text.slice(0, 7), text.slice(7, 13), text.slice(13)];
    expect(Array.from(cut[0]!).at(-1)).to.be.greaterThan(0x7f); // the cut falls inside "é"
    expect(await collect(cut)).to.deep.equal([{ a: 'é' }, { b: 2 }, { c: 3 }]);
    expect(await collect(['{"x":1}\n', '{"y"', ':2}\n'])).to.deep.equal([{ x: 1 }, { y: 2 }]);
  });
});
