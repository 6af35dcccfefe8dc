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
  /**
   * False while some keys could not be loaded yet (the stored keys, MongoDB not answering since
   * the process started): `verify` finding nothing then does not mean the token is no key.
   * Absent = always true (keys from configuration).
   */
  complete?(): boolean;
}

/** Tokens verified lately, at most this many (a larger set is forgotten whole and fills again). */
const VERIFIED_TOKENS_MAX = 1024;

/**
 * The tokens a verifier has accepted, so that a client that sends its key on every request costs
 * one map lookup instead of a SHA-256 and a comparison with every key (issue 23's profile: about
 * 2 µs a request). Only accepted tokens are kept: an unknown token is hashed and compared every
 * time, so a guesser learns nothing from timing that the comparison did not tell before, and
 * cannot fill the map. `clear()` forgets every token (keys reloaded: a revoked key stops here too).
 */
export interface VerifiedTokens {
  get(token: string): AuthenticatedKey | undefined;
  remember(token: string, key: AuthenticatedKey): void;
  clear(): void;
}

export function createVerifiedTokens(max = VERIFIED_TOKENS_MAX): VerifiedTokens {
  let tokens = new Map<string, AuthenticatedKey>();
  return {
    get: (token) => tokens.get(token),
    remember(token, key) {
      if (tokens.size >= max) tokens = new Map();
      tokens.set(token, key);
    },
    clear() {
      tokens = new Map();
    },
  };
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
  const verified = createVerifiedTokens();
  return {
    verify(token) {
      const known = verified.get(token);
      if (known !== undefined) return known;
      const digest = sha256(token);
      let found: AuthenticatedKey | undefined;
      for (const entry of scoped) {
        if (timingSafeEqual(digest, entry.digest) && found === undefined) found = entry.key;
      }
      if (found !== undefined) verified.remember(token, found);
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
    complete: () => verifiers.every((v) => v.complete?.() ?? true),
  };
}
