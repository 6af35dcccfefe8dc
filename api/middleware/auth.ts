import { createHash, timingSafeEqual } from 'node:crypto';
import type { Middleware } from 'koa';
import type { ApiKeyConfig } from '../../shared/config.js';
import { AppError } from '../../shared/errors.js';

export interface AuthenticatedKey {
  readonly name: string;
}

export interface KeyVerifier {
  /** The key whose secret is `token`, or undefined. Constant time in the token and key count. */
  verify(token: string): AuthenticatedKey | undefined;
}

/**
 * Compares SHA-256 digests with timingSafeEqual against every configured key, without stopping
 * at a match, so neither the secret's bytes nor its position leak through timing.
 */
export function createKeyVerifier(keys: readonly ApiKeyConfig[]): KeyVerifier {
  return {
    verify(token) {
      const digest = createHash('sha256').update(token, 'utf8').digest();
      let found: AuthenticatedKey | undefined;
      for (const key of keys) {
        if (timingSafeEqual(digest, key.digest) && found === undefined) found = { name: key.name };
      }
      return found;
    },
  };
}

const BEARER_RE = /^Bearer +([\x21-\x7e]+) *$/i;

export function authenticate(verifier: KeyVerifier): Middleware {
  return async (ctx, next) => {
    const header = ctx.get('Authorization');
    const match = BEARER_RE.exec(header);
    if (match === null) {
      throw new AppError('unauthorized', 'send Authorization: Bearer <API key>', { headers: { 'WWW-Authenticate': 'Bearer' } });
    }
    const key = verifier.verify(match[1]!);
    if (key === undefined) {
      throw new AppError('invalid_api_key', 'the API key is not known or not active', {
        headers: { 'WWW-Authenticate': 'Bearer error="invalid_token"' },
      });
    }
    ctx.state['apiKey'] = key;
    await next();
  };
}
