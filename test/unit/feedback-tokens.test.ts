import { createHash, hkdfSync, randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { SignJWT } from 'jose';
import { createFeedbackTokens, looksLikeFeedbackToken, type FeedbackTokenScope } from '../../api/feedback-tokens.js';

const OLD = 'old-signing-secret-0123456789';
const NEW = 'new-signing-secret-9876543210';
const SCOPE: FeedbackTokenScope = { recordId: 'rec_abc', userId: 'end-user-77', questions: ['rating', 'comment'], issuedBy: 'chatbot-backend' };
const T0 = Date.UTC(2026, 10, 23, 12, 0, 0);

const tokens = (secrets: readonly string[], now = () => T0, maxTtlSeconds = 3600) => createFeedbackTokens({ secrets, defaultTtlSeconds: 900, maxTtlSeconds, now });
const part = (token: string, i: number) => JSON.parse(Buffer.from(token.split('.')[i]!, 'base64url').toString('utf8')) as Record<string, unknown>;
const encode = (json: unknown) => Buffer.from(JSON.stringify(json)).toString('base64url');

/** The derivation docs/client.md documents, computed independently of api/feedback-tokens.ts. */
function documentedKey(secret: string): { key: Uint8Array; kid: string } {
  const key = new Uint8Array(hkdfSync('sha256', Buffer.from(secret, 'utf8'), 'feedback-ingest', 'feedback-token/v1', 32));
  return { key, kid: createHash('sha256').update('kid\0').update(key).digest().subarray(0, 9).toString('base64url') };
}

/** A token signed with `secret`'s documented key, claims and header as given. */
async function handMade(secret: string, claims: Record<string, unknown>, header: Record<string, unknown> = {}): Promise<string> {
  const { key, kid } = documentedKey(secret);
  return new SignJWT(claims).setProtectedHeader({ alg: 'HS256', kid, typ: 'feedback-token+jwt', ...header }).sign(key);
}

const validClaims = () => ({ iss: 'feedback-ingest', aud: 'POST /feedback-response', sub: 'u1', rec: 'rec_abc', azp: 'k', iat: T0 / 1000, exp: T0 / 1000 + 60 });

describe('feedback tokens (api/feedback-tokens.ts)', () => {
  it('needs at least one secret', () => {
    expect(() => tokens([])).to.throw();
  });

  it('round-trips the scope through a compact JWS (HS256, kid, typ) that another process with the secret verifies', async () => {
    const minted = await tokens([OLD]).mint(SCOPE);
    expect(looksLikeFeedbackToken(minted.token)).to.equal(true);
    expect(part(minted.token, 0)).to.deep.equal({ alg: 'HS256', kid: documentedKey(OLD).kid, typ: 'feedback-token+jwt' });
    expect(part(minted.token, 1)).to.include({ sub: 'end-user-77', rec: 'rec_abc', azp: 'chatbot-backend', iat: T0 / 1000, exp: T0 / 1000 + 900 });
    expect(minted.expiresAt.getTime()).to.equal(T0 + 900_000);
    expect(await tokens([OLD]).verify(minted.token)).to.deep.equal({ ok: true, scope: SCOPE });
    const limited = await tokens([OLD]).mint({ ...SCOPE, rateLimitPerMinute: 120 });
    expect(await tokens([OLD]).verify(limited.token)).to.deep.equal({ ok: true, scope: { ...SCOPE, rateLimitPerMinute: 120 } });
    const anyQuestion = await tokens([OLD]).mint({ ...SCOPE, questions: null }, 60);
    expect(await tokens([OLD]).verify(anyQuestion.token)).to.deep.equal({ ok: true, scope: { ...SCOPE, questions: null } });
  });

  it('derives the key as documented (HKDF-SHA256 of the id-signing secret): a hand-made token with it verifies', async () => {
    const token = await handMade(OLD, validClaims());
    expect(await tokens([OLD]).verify(token)).to.deep.equal({ ok: true, scope: { recordId: 'rec_abc', userId: 'u1', questions: null, issuedBy: 'k' } });
  });

  it('rotates with ID_SIGNING_SECRETS: the first secret signs, every one verifies, a removed one no longer does', async () => {
    const old = await tokens([OLD]).mint(SCOPE);
    const rotated = tokens([NEW, OLD]);
    expect((await rotated.verify(old.token)).ok, 'a token of the old secret during the rotation').to.equal(true);
    const fresh = await rotated.mint(SCOPE);
    expect(part(fresh.token, 0)['kid']).to.equal(documentedKey(NEW).kid);
    expect((await tokens([NEW]).verify(fresh.token)).ok).to.equal(true);
    expect(await tokens([NEW]).verify(old.token), 'the old secret removed').to.deep.equal({ ok: false, reason: 'invalid' });
    expect(await tokens([OLD]).verify(fresh.token), 'a secret it never had').to.deep.equal({ ok: false, reason: 'invalid' });
  });

  it('refuses every altered token: header, claims (record, annotator, questions, expiry) or signature', async () => {
    const { token } = await tokens([OLD]).mint(SCOPE);
    const [h, p, s] = token.split('.') as [string, string, string];
    const payload = part(token, 1);
    const altered = [
      ['rec', { ...payload, rec: 'rec_other' }],
      ['sub', { ...payload, sub: 'someone-else' }],
      ['q', { ...payload, q: ['rating', 'comment', 'admin'] }],
      ['no q (any question)', Object.fromEntries(Object.entries(payload).filter(([k]) => k !== 'q'))],
      ['exp', { ...payload, exp: (payload['exp'] as number) + 86_400 }],
    ] as const;
    for (const [what, claims] of altered) {
      expect(await tokens([OLD]).verify(`${h}.${encode(claims)}.${s}`), what).to.deep.equal({ ok: false, reason: 'invalid' });
    }
    const sig = Buffer.from(s, 'base64url');
    for (let i = 0; i < sig.length; i++) {
      const flipped = Buffer.from(sig);
      flipped[i] = flipped[i]! ^ 0x01;
      expect((await tokens([OLD]).verify(`${h}.${p}.${flipped.toString('base64url')}`)).ok, `signature byte ${i}`).to.equal(false);
    }
    expect((await tokens([OLD]).verify(`${encode({ alg: 'none', typ: 'feedback-token+jwt' })}.${p}.`)).ok, 'alg none').to.equal(false);
    expect((await tokens([OLD]).verify(`${encode({ alg: 'HS512', kid: documentedKey(OLD).kid, typ: 'feedback-token+jwt' })}.${p}.${s}`)).ok, 'another alg').to.equal(false);
    expect((await tokens([OLD]).verify('not.a.token')).ok).to.equal(false);
  });

  it('refuses a token signed with the right key that is not a feedback token (audience, issuer, type, claims)', async () => {
    const cases: [string, Record<string, unknown>, Record<string, unknown>?][] = [
      ['another audience', { ...validClaims(), aud: 'POST /feedback-record' }],
      ['another issuer', { ...validClaims(), iss: 'someone' }],
      ['no expiry', Object.fromEntries(Object.entries(validClaims()).filter(([k]) => k !== 'exp'))],
      ['no record', Object.fromEntries(Object.entries(validClaims()).filter(([k]) => k !== 'rec'))],
      ['questions not a list of strings', { ...validClaims(), q: 'rating' }],
      ['another typ', validClaims(), { typ: 'JWT' }],
    ];
    for (const [what, claims, header] of cases) {
      expect(await tokens([OLD]).verify(await handMade(OLD, claims, header)), what).to.deep.equal({ ok: false, reason: 'invalid' });
    }
    // The raw secret as the key (no HKDF) is not the token key.
    const raw = await new SignJWT(validClaims()).setProtectedHeader({ alg: 'HS256', kid: documentedKey(OLD).kid, typ: 'feedback-token+jwt' }).sign(Buffer.from(OLD));
    expect((await tokens([OLD]).verify(raw)).ok, 'signed with the raw secret').to.equal(false);
  });

  it('is valid until its expiry and expired from that second on', async () => {
    const { token } = await tokens([OLD]).mint(SCOPE, 60);
    expect((await tokens([OLD], () => T0 + 59_999).verify(token)).ok).to.equal(true);
    expect(await tokens([OLD], () => T0 + 60_000).verify(token)).to.deep.equal({ ok: false, reason: 'expired' });
    expect(await tokens([OLD], () => T0 + 86_400_000).verify(token)).to.deep.equal({ ok: false, reason: 'expired' });
  });

  it('an altered expired token is invalid, not expired (the signature is checked first)', async () => {
    const { token } = await tokens([OLD]).mint(SCOPE, 60);
    const [h, , s] = token.split('.') as [string, string, string];
    const forged = `${h}.${encode({ ...part(token, 1), sub: 'x' })}.${s}`;
    expect(await tokens([OLD], () => T0 + 120_000).verify(forged)).to.deep.equal({ ok: false, reason: 'invalid' });
  });

  it('refuses a token issued longer ago than the current maximum lifetime, whatever its exp', async () => {
    const { token } = await tokens([OLD], () => T0, 7200).mint(SCOPE, 7200);
    expect((await tokens([OLD], () => T0 + 3_000_000, 7200).verify(token)).ok).to.equal(true);
    expect(await tokens([OLD], () => T0 + 3_601_000, 3600).verify(token)).to.deep.equal({ ok: false, reason: 'expired' });
  });

  it('accepts a token minted by a process whose clock is ahead (iat a little in the future)', async () => {
    const { token } = await tokens([OLD], () => T0 + 5_000).mint(SCOPE, 60);
    expect((await tokens([OLD], () => T0).verify(token)).ok).to.equal(true);
  });

  it('tells a token from an API key by its shape alone', () => {
    expect(looksLikeFeedbackToken('eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln')).to.equal(true);
    for (const key of ['test-secret-key-0001', `fik_${randomBytes(32).toString('base64url')}` /* a stored key's shape */, 'a.b.c', 'eyJ.x', 'eyJa.b.c.d', 'eyJa.b.c d']) {
      expect(looksLikeFeedbackToken(key), key).to.equal(false);
    }
  });
});
