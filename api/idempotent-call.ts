import { authenticatedKey, type ApiContext } from './state.js';
import { AppError } from '../shared/errors.js';
import { NOT_QUEUED_MESSAGE } from './enqueuer.js';
import { isValidIdempotencyKey, requestFingerprint, type IdempotencyStore } from './idempotency.js';

/** The request's `Idempotency-Key`, undefined without one; 400 `invalid_header` when malformed. */
export function readIdempotencyKey(ctx: ApiContext): string | undefined {
  const raw = ctx.req.headers['idempotency-key'];
  if (raw === undefined) return undefined;
  // Node joins repeated headers into one value ("a, b"), which would pass as one key.
  if (Array.isArray(raw) || !isValidIdempotencyKey(raw) || headerCount(ctx.req.rawHeaders, 'idempotency-key') > 1) {
    throw new AppError('invalid_header', 'Idempotency-Key must be one header of 1 to 255 printable characters');
  }
  return raw;
}

/** How often the header `lowerName` was sent (`rawHeaders` alternates names and values). */
function headerCount(rawHeaders: readonly string[], lowerName: string): number {
  let n = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) if (rawHeaders[i]!.length === lowerName.length && rawHeaders[i]!.toLowerCase() === lowerName) n++;
  return n;
}

/**
 * Whose `Idempotency-Key`s a request's key lives among: the API key's, or for a feedback token
 * its (minting key, record, annotator), so that two browsers sharing a minting key never replay
 * each other's answers. `\0` cannot occur in key names.
 */
function idempotencyOwner(ctx: ApiContext): string {
  const key = authenticatedKey(ctx);
  const token = ctx.state.feedbackToken;
  return token === undefined ? key.name : `${key.name}\0token\0${token.recordId}\0${token.userId}`;
}

/**
 * The idempotency protocol around one write call. Without a key, `run(undefined)`. With one: a
 * repeat returns the first answer (`Idempotent-Replayed: true`), a different body is 409, a key
 * still running is 409 with `Retry-After`; else `run(seed)` where `seed` is derived from (key
 * name, idempotency key, body), so that a retry after a lost answer mints the same ids. A failed
 * `run` releases the key so the retry can run. Returns the answer body.
 */
export async function idempotentCall(
  ctx: ApiContext,
  deps: { readonly idempotency: IdempotencyStore; readonly retryAfterSeconds: number },
  options: { readonly endpoint: string; readonly body: unknown; readonly idemKey: string | undefined },
  run: (seed: string | undefined) => Promise<unknown>,
): Promise<unknown> {
  const { endpoint, body, idemKey } = options;
  if (idemKey === undefined) return run(undefined);
  const owner = idempotencyOwner(ctx);
  const fingerprint = requestFingerprint(endpoint, body);
  const claim = deps.idempotency.claim(fingerprint);
  let begun;
  try {
    begun = await deps.idempotency.begin(owner, idemKey, fingerprint, claim);
  } catch (err) {
    // The claim's SET may still land (a Redis that answers late): released behind it, or it would
    // block this key's retries for IDEMPOTENCY_PENDING_TTL_SECONDS with no request running. Not
    // awaited: the release waits for the same slow Redis, and the answer need not.
    deps.idempotency.release(owner, idemKey, claim).catch(() => undefined);
    throw new AppError('queue_unavailable', `${NOT_QUEUED_MESSAGE}: Redis did not answer the Idempotency-Key's claim; retry with the same Idempotency-Key`, {
      headers: { 'Retry-After': String(deps.retryAfterSeconds) },
      cause: err,
    });
  }
  switch (begun.state) {
    case 'replay':
      ctx.set('Idempotent-Replayed', 'true');
      return begun.body;
    case 'reused':
      throw new AppError('idempotency_key_reused', 'this Idempotency-Key was used with a different request');
    case 'in_use':
      throw new AppError('idempotency_key_in_use', 'a request with this Idempotency-Key is still running; retry shortly', {
        headers: { 'Retry-After': '1' },
      });
    case 'new':
      break;
  }
  let answer: unknown;
  try {
    answer = await run(`${owner}\0${idemKey}\0${fingerprint}`);
  } catch (err) {
    await deps.idempotency.release(owner, idemKey, claim).catch(() => undefined);
    throw err;
  }
  // The write is queued: if keeping the replay body fails, the claim expires and a retry mints
  // the same ids (seeded), which the worker stores once.
  await deps.idempotency.complete(owner, idemKey, fingerprint, answer).catch((err: unknown) => {
    ctx.state.log.warn({ err: (err as Error).message }, 'could not keep the idempotent answer');
  });
  return answer;
}

/** Size of the request body in bytes (set by the jsonBody middleware), for the enqueuer's limits. */
export function bodyBytes(ctx: ApiContext): number {
  const bytes: unknown = ctx.state.bodyBytes;
  return typeof bytes === 'number' ? bytes : 0;
}
