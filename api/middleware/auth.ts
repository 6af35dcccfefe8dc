import { createHash, timingSafeEqual } from 'node:crypto';
import type { Middleware } from 'koa';
import type { ApiKeyConfig } from '../../shared/config.js';
import { AppError } from '../../shared/errors.js';
import { looksLikeFeedbackToken, type FeedbackTokens, type FeedbackTokenScope } from '../feedback-tokens.js';

/** The key a request authenticated with; `ctx.state['apiKey']`. */
export interface AuthenticatedKey {
  readonly name: string;
  /** Datasets the key may write to; null = any (every `API_KEYS` key). */
  readonly datasets: readonly string[] | null;
  /** May call the admin endpoints (`/admin/...`), and read every dataset. */
  readonly admin: boolean;
  /** May read the datasets it may write to (`GET /feedback-record/…`, `/datasets/…`). */
  readonly read: boolean;
  /** The key's own write limit per minute (stored keys only); absent = the configured default. */
  readonly rateLimitPerMinute?: number;
}

export interface KeyVerifier {
  /** The key whose secret is `token`, or undefined. Constant time in the token and key count. */
  verify(token: string): AuthenticatedKey | undefined;
}

/**
 * Compares SHA-256 digests with timingSafeEqual against every configured key, without stopping
 * at a match, so neither the secret's bytes nor its position leak through timing. Keys named in
 * `adminNames` (`ADMIN_API_KEY_NAMES`) carry the admin scope, those in `readNames`
 * (`READ_API_KEY_NAMES`) the read scope; none is limited to datasets.
 */
export function createKeyVerifier(keys: readonly ApiKeyConfig[], options: { adminNames?: readonly string[]; readNames?: readonly string[] } = {}): KeyVerifier {
  const admins = new Set(options.adminNames ?? []);
  const readers = new Set(options.readNames ?? []);
  const scoped = keys.map((key) => ({ digest: key.digest, key: Object.freeze({ name: key.name, datasets: null, admin: admins.has(key.name), read: readers.has(key.name) }) }));
  return {
    verify(token) {
      const digest = createHash('sha256').update(token, 'utf8').digest();
      let found: AuthenticatedKey | undefined;
      for (const entry of scoped) {
        if (timingSafeEqual(digest, entry.digest) && found === undefined) found = entry.key;
      }
      return found;
    },
  };
}

/** Tries each verifier in order (the `API_KEYS` keys, then the keys stored in MongoDB). */
export function chainKeyVerifiers(...verifiers: readonly KeyVerifier[]): KeyVerifier {
  return {
    verify(token) {
      for (const verifier of verifiers) {
        const key = verifier.verify(token);
        if (key !== undefined) return key;
      }
      return undefined;
    },
  };
}

/** True when `key` may write to `datasetId`. */
export function mayWriteDataset(key: AuthenticatedKey, datasetId: string): boolean {
  return key.datasets === null || key.datasets.includes(datasetId);
}

/**
 * True when `key` may read `datasetId`: admin keys read every dataset; other keys need the read
 * scope, and read only the datasets they may write to. A write key cannot read (a chatbot's key
 * would otherwise expose everyone's feedback).
 */
export function mayReadDataset(key: AuthenticatedKey, datasetId: string): boolean {
  return key.admin || (key.read && mayWriteDataset(key, datasetId));
}

const BEARER_RE = /^Bearer +([\x21-\x7e]+) *$/i;

/** The token of an `Authorization: Bearer <token>` header (printable ASCII, scheme case-insensitive), or undefined. */
export function bearerToken(header: string): string | undefined {
  return BEARER_RE.exec(header)?.[1];
}

const INVALID_TOKEN_CHALLENGE = 'Bearer error="invalid_token"';

/**
 * Authenticates `Authorization: Bearer <API key>`, and, on routes given `feedbackTokens`, a
 * browser feedback token instead (`ctx.state['feedbackToken']`). The API key is tried first and
 * costs the same as without tokens; only a bearer that is no key and has the JWS shape is
 * verified as a token. Without `feedbackTokens` a token is just an unknown key.
 */
export function authenticate(verifier: KeyVerifier, options: { feedbackTokens?: FeedbackTokens } = {}): Middleware {
  const tokens = options.feedbackTokens;
  return async (ctx, next) => {
    const token = bearerToken(ctx.get('Authorization'));
    if (token === undefined) {
      throw new AppError('unauthorized', 'send Authorization: Bearer <API key>', { headers: { 'WWW-Authenticate': 'Bearer' } });
    }
    const key = verifier.verify(token);
    if (key !== undefined) {
      ctx.state['apiKey'] = key;
      await next();
      return;
    }
    if (!looksLikeFeedbackToken(token)) {
      throw new AppError('invalid_api_key', 'the API key is not known or not active', { headers: { 'WWW-Authenticate': INVALID_TOKEN_CHALLENGE } });
    }
    if (tokens === undefined) {
      throw new AppError('invalid_api_key', 'feedback tokens are accepted by POST /feedback-response only; this endpoint needs an API key', {
        headers: { 'WWW-Authenticate': INVALID_TOKEN_CHALLENGE },
      });
    }
    const checked = await tokens.verify(token);
    if (!checked.ok) {
      throw checked.reason === 'expired'
        ? new AppError('token_expired', 'the feedback token has expired; ask the service that gave it for a new one', {
            headers: { 'WWW-Authenticate': 'Bearer error="invalid_token", error_description="token expired"' },
          })
        : new AppError('invalid_token', 'the feedback token is not valid (altered, signed with an unknown key, or not a feedback token)', {
            headers: { 'WWW-Authenticate': INVALID_TOKEN_CHALLENGE },
          });
    }
    ctx.state['feedbackToken'] = checked.scope;
    // The key that minted the token (its name and write limit: one budget for both), with no
    // dataset of its own: anything that checks datasets without knowing tokens refuses (the
    // route checks the token's record instead).
    const { issuedBy, rateLimitPerMinute } = checked.scope;
    ctx.state['apiKey'] = Object.freeze({
      name: issuedBy,
      datasets: Object.freeze([]),
      admin: false,
      read: false,
      ...(rateLimitPerMinute === undefined ? {} : { rateLimitPerMinute }),
    }) satisfies AuthenticatedKey;
    await next();
  };
}

/** The feedback token a request authenticated with (routes given `feedbackTokens`), or undefined for an API key. */
export function feedbackTokenOf(state: Record<string, unknown>): FeedbackTokenScope | undefined {
  return state['feedbackToken'] as FeedbackTokenScope | undefined;
}
