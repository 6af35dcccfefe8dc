import { AppError } from '../../shared/errors.js';
import { looksLikeFeedbackToken, type FeedbackTokens } from '../feedback-tokens.js';
import type { AuthenticatedKey, KeyVerifier } from '../key-verifier.js';
import type { ApiMiddleware } from '../state.js';
import { storeUnavailable } from '../store-down.js';

const BEARER_RE = /^Bearer +([\x21-\x7e]+) *$/i;

/** The token of an `Authorization: Bearer <token>` header (printable ASCII, scheme case-insensitive), or undefined. */
export function bearerToken(header: string): string | undefined {
  return BEARER_RE.exec(header)?.[1];
}

const INVALID_TOKEN_CHALLENGE = 'Bearer error="invalid_token"';

/**
 * A token that is no key known so far, while the stored keys could not be loaded yet (MongoDB
 * has not answered since the process started): it may be a stored key, so the answer is a
 * retryable 503, never a final 401.
 */
function keysNotLoaded(retryAfterSeconds: number): AppError {
  return storeUnavailable(retryAfterSeconds, 'the stored API keys are not loaded yet (MongoDB has not answered since this process started); retry later');
}

/**
 * Authenticates `Authorization: Bearer <API key>`, and, on routes given `feedbackTokens`, a
 * browser feedback token instead (`ctx.state.feedbackToken`). The API key is tried first and
 * costs the same as without tokens; only a bearer that is no key and has the JWS shape is
 * verified as a token. Without `feedbackTokens` a token is just an unknown key. An unknown key
 * is 401 once every key is loaded, 503 `store_unavailable` before (KeyVerifier `complete`).
 */
export function authenticate(verifier: KeyVerifier, options: { feedbackTokens?: FeedbackTokens; retryAfterSeconds?: number } = {}): ApiMiddleware {
  const tokens = options.feedbackTokens;
  const retryAfterSeconds = options.retryAfterSeconds ?? 1;
  // Not async on the usual path (a known API key): one promise layer less per request; a throw
  // here becomes the chain's rejection (koa-compose and api/lean-routes.ts composeOnce catch it).
  return (ctx, next) => {
    const token = bearerToken(ctx.get('Authorization'));
    if (token === undefined) {
      throw new AppError('unauthorized', 'send Authorization: Bearer <API key>', { headers: { 'WWW-Authenticate': 'Bearer' } });
    }
    const key = verifier.verify(token);
    if (key !== undefined) {
      ctx.state.apiKey = key;
      return next();
    }
    return otherToken(ctx, next, token);
  };

  /** A bearer that is no known key: a feedback token where they are taken, else 401 (or 503 before the keys are loaded). */
  async function otherToken(ctx: Parameters<ApiMiddleware>[0], next: Parameters<ApiMiddleware>[1], token: string): Promise<void> {
    if (!looksLikeFeedbackToken(token)) {
      if (verifier.complete?.() === false) throw keysNotLoaded(retryAfterSeconds);
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
    ctx.state.feedbackToken = checked.scope;
    // The key that minted the token (its name and write limit: one budget for both), with no
    // dataset of its own: anything that checks datasets without knowing tokens refuses (the
    // route checks the token's record instead).
    const { issuedBy, rateLimitPerMinute } = checked.scope;
    ctx.state.apiKey = Object.freeze({
      name: issuedBy,
      datasets: Object.freeze([]),
      admin: false,
      read: false,
      ...(rateLimitPerMinute === undefined ? {} : { rateLimitPerMinute }),
    }) satisfies AuthenticatedKey;
    await next();
  }
}
