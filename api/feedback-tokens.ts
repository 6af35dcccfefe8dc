import { createHash, hkdfSync } from 'node:crypto';
import { errors, jwtVerify, SignJWT, type JWTHeaderParameters } from 'jose';
import * as v from 'valibot';

/** What a feedback token lets a browser do: answer one record as one annotator, maybe only some questions. */
export interface FeedbackTokenScope {
  readonly recordId: string;
  /** The annotator (`user_id`) every write of the token is stored under. */
  readonly userId: string;
  /** The `values` keys the token may write; null = any. */
  readonly questions: readonly string[] | null;
  /** Name of the API key that minted the token: the writes are attributed and rate-limited to it. */
  readonly issuedBy: string;
  /** The minting key's own write limit per minute (stored keys may have one), so that its token's writes share it. */
  readonly rateLimitPerMinute?: number;
}

export interface MintedToken {
  readonly token: string;
  readonly expiresAt: Date;
  readonly expiresInSeconds: number;
}

export type TokenCheck =
  | { readonly ok: true; readonly scope: FeedbackTokenScope }
  | { readonly ok: false; readonly reason: 'expired' | 'invalid' };

export interface FeedbackTokens {
  /** A signed token for `scope`, valid `ttlSeconds` (default and maximum as configured; the caller checks the maximum). */
  mint(scope: FeedbackTokenScope, ttlSeconds?: number): Promise<MintedToken>;
  /** The scope of a token this service minted under one of its secrets, unexpired; else why not. */
  verify(token: string): Promise<TokenCheck>;
}

interface FeedbackTokenOptions {
  /** `ID_SIGNING_SECRETS`: the first signs, every one verifies (rotation as for record ids). */
  readonly secrets: readonly string[];
  /** Lifetime when the caller asks for none, s (`FEEDBACK_TOKEN_TTL_SECONDS`). */
  readonly defaultTtlSeconds: number;
  /** Tokens issued longer ago than this are refused, whatever their `exp`, s (`FEEDBACK_TOKEN_MAX_TTL_SECONDS`). */
  readonly maxTtlSeconds: number;
  /** Clock, ms since the epoch; tests mint tokens in the past with it. Default `Date.now`. */
  readonly now?: () => number;
}

const ISSUER = 'feedback-ingest';
/** The one operation a token is good for: a token is refused by every other route by construction, and this says so in the token too. */
const AUDIENCE = 'POST /feedback-response';
const TYPE = 'feedback-token+jwt';
const ALGORITHM = 'HS256';

/** JWS compact serialisation of a JSON header (`eyJ` is base64url of `{"`): three base64url parts. */
const JWS_COMPACT_RE = /^eyJ[\w-]*\.[\w-]+\.[\w-]+$/;

/** True when `token` has the shape of a feedback token; cheap, so the API-key path is not slowed. */
export function looksLikeFeedbackToken(token: string): boolean {
  return JWS_COMPACT_RE.test(token);
}

/**
 * The token key is derived from each id-signing secret with HKDF (RFC 5869) rather than being a
 * setting of its own: rotating `ID_SIGNING_SECRETS` rotates both, and the derived key differs
 * from the secret itself, so a token's HMAC can never double as a record-id tag.
 */
function deriveKey(secret: string): Uint8Array {
  return new Uint8Array(hkdfSync('sha256', Buffer.from(secret, 'utf8'), 'feedback-ingest', 'feedback-token/v1', 32));
}

/** Names a key without revealing it: a hash of the derived key, so tokens say which secret signed them. */
function keyId(key: Uint8Array): string {
  return createHash('sha256').update('kid\0').update(key).digest().subarray(0, 9).toString('base64url');
}

/** The claims this module writes, checked again on the way in (a valid signature proves origin, not shape). */
const Claims = v.object({
  sub: v.pipe(v.string(), v.minLength(1)),
  rec: v.pipe(v.string(), v.minLength(1)),
  azp: v.pipe(v.string(), v.minLength(1)),
  q: v.exactOptional(v.array(v.string())),
  rl: v.exactOptional(v.pipe(v.number(), v.safeInteger(), v.minValue(0))),
  iat: v.number(),
});

/** Mints and verifies browser feedback tokens: JWS (HS256) via `jose`, scoped to one record and annotator. */
export function createFeedbackTokens(options: FeedbackTokenOptions): FeedbackTokens {
  if (options.secrets.length === 0) throw new Error('createFeedbackTokens needs at least one secret');
  const now = options.now ?? Date.now;
  const keys = new Map<string, Uint8Array>();
  for (const secret of options.secrets) {
    const key = deriveKey(secret);
    keys.set(keyId(key), key);
  }
  const [signerKid, signerKey] = [...keys][0]!;
  const keyFor = (header: JWTHeaderParameters): Uint8Array => {
    const key = header.kid === undefined ? undefined : keys.get(header.kid);
    if (key === undefined) throw new Error('no key has this kid');
    return key;
  };

  return {
    async mint(scope, ttlSeconds = options.defaultTtlSeconds) {
      const issuedAt = Math.floor(now() / 1000);
      const expiresAt = issuedAt + ttlSeconds;
      const claims: Record<string, unknown> = { rec: scope.recordId, azp: scope.issuedBy };
      if (scope.questions !== null) claims['q'] = [...scope.questions];
      if (scope.rateLimitPerMinute !== undefined) claims['rl'] = scope.rateLimitPerMinute;
      const token = await new SignJWT(claims)
        .setProtectedHeader({ alg: ALGORITHM, kid: signerKid, typ: TYPE })
        .setIssuer(ISSUER)
        .setAudience(AUDIENCE)
        .setSubject(scope.userId)
        .setIssuedAt(issuedAt)
        .setExpirationTime(expiresAt)
        .sign(signerKey);
      return { token, expiresAt: new Date(expiresAt * 1000), expiresInSeconds: ttlSeconds };
    },

    async verify(token) {
      let payload: unknown;
      try {
        // jose checks the signature before any claim, so an altered expired token is 'invalid', not 'expired'.
        ({ payload } = await jwtVerify(token, keyFor, {
          algorithms: [ALGORITHM],
          issuer: ISSUER,
          audience: AUDIENCE,
          typ: TYPE,
          requiredClaims: ['exp', 'iat', 'sub'],
          currentDate: new Date(now()),
        }));
      } catch (err) {
        return { ok: false, reason: err instanceof errors.JWTExpired ? 'expired' : 'invalid' };
      }
      const claims = v.safeParse(Claims, payload);
      if (!claims.success) return { ok: false, reason: 'invalid' };
      const { sub, rec, azp, q, rl, iat } = claims.output;
      // Not jose's maxTokenAge: it also refuses an `iat` in the future, which is what a token
      // minted by another API process whose clock is a second ahead looks like.
      if (Math.floor(now() / 1000) - iat > options.maxTtlSeconds) return { ok: false, reason: 'expired' };
      return { ok: true, scope: { recordId: rec, userId: sub, questions: q ?? null, issuedBy: azp, ...(rl === undefined ? {} : { rateLimitPerMinute: rl }) } };
    },
  };
}
