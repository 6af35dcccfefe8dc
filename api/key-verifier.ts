import { timingSafeEqual } from 'node:crypto';
import { sha256 } from '../shared/digest.js';
import type { ApiKeyConfig } from '../shared/config.js';

// Key lookup: which key a presented secret is. What a key may do is api/scopes.ts; the
// middleware that reads the header is api/middleware/auth.ts.

/** The key a request authenticated with; `ctx.state.apiKey`. */
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
      const digest = sha256(token);
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
