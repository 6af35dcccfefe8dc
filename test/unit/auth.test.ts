import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { chainKeyVerifiers, createKeyVerifier, createVerifiedTokens, type KeyVerifier } from '../../api/key-verifier.js';
import { mayReadDataset, mayWriteDataset } from '../../api/scopes.js';
import { loadConfig } from '../../shared/config.js';

describe('createKeyVerifier (api/middleware/auth.ts)', () => {
  const hashed = 'hashed-key-secret-55';
  const keys = loadConfig({
    API_KEYS: `bot:bot-secret-0001,annotator:annotator-secret-02,hashed:sha256:${createHash('sha256').update(hashed).digest('hex')}`,
  }).apiKeys;
  const verifier = createKeyVerifier(keys);

  it('finds the key whose secret is the token', () => {
    expect(verifier.verify('bot-secret-0001')).to.deep.equal({ name: 'bot', datasets: null, admin: false, read: false });
    expect(verifier.verify('annotator-secret-02')).to.deep.equal({ name: 'annotator', datasets: null, admin: false, read: false });
  });

  it('finds a key configured as sha256:<digest>', () => {
    expect(verifier.verify(hashed)).to.deep.equal({ name: 'hashed', datasets: null, admin: false, read: false });
  });

  for (const [name, token] of [
    ['an empty token', ''],
    ['an unknown token', 'nobody-has-this-key'],
    ['a key with a changed case', 'BOT-SECRET-0001'],
    ['a prefix of a key', 'bot-secret-000'],
    ['a key with a trailing space', 'bot-secret-0001 '],
    ['a key name', 'bot'],
    ['the sha256: form itself', `sha256:${createHash('sha256').update(hashed).digest('hex')}`],
  ] as const) {
    it(`finds nothing for ${name}`, () => {
      expect(verifier.verify(token)).to.equal(undefined);
    });
  }

  it('a token verified once is found again (from the verified tokens), the same key; a near miss of it still is not', () => {
    const v = createKeyVerifier(keys);
    const first = v.verify('bot-secret-0001');
    expect(v.verify('bot-secret-0001')).to.equal(first);
    expect(v.verify('bot-secret-0002')).to.equal(undefined);
  });

  it('the verified tokens are bounded (full, they are forgotten whole) and forgotten on clear()', () => {
    const key = { name: 'k', datasets: null, admin: false, read: false };
    const tokens = createVerifiedTokens(2);
    tokens.remember('a', key);
    tokens.remember('b', key);
    tokens.remember('c', key);
    expect([tokens.get('a'), tokens.get('b'), tokens.get('c')]).to.deep.equal([undefined, undefined, key]);
    tokens.clear();
    expect(tokens.get('c')).to.equal(undefined);
  });

  it('finds nothing when no key is configured', () => {
    expect(createKeyVerifier([]).verify('bot-secret-0001')).to.equal(undefined);
  });
});

describe('key scopes (api/middleware/auth.ts)', () => {
  const keys = loadConfig({ API_KEYS: 'bot:bot-secret-0001,ops:ops-secret-0002', ADMIN_API_KEY_NAMES: 'ops' }).apiKeys;

  it('gives the admin scope to the keys named in ADMIN_API_KEY_NAMES only', () => {
    const verifier = createKeyVerifier(keys, { adminNames: ['ops'] });
    expect(verifier.verify('ops-secret-0002')).to.deep.equal({ name: 'ops', datasets: null, admin: true, read: false });
    expect(verifier.verify('bot-secret-0001')).to.deep.equal({ name: 'bot', datasets: null, admin: false, read: false });
  });

  it('ADMIN_API_KEY_NAMES must name keys of API_KEYS', () => {
    expect(() => loadConfig({ API_KEYS: 'bot:bot-secret-0001', ADMIN_API_KEY_NAMES: 'bot,nobody' })).to.throw(/ADMIN_API_KEY_NAMES .*nobody/);
  });

  it('gives the read scope to the keys named in READ_API_KEY_NAMES only, which must be keys of API_KEYS', () => {
    const config = loadConfig({ API_KEYS: 'bot:bot-secret-0001,ops:ops-secret-0002', READ_API_KEY_NAMES: 'ops' });
    expect(config.readApiKeyNames).to.deep.equal(['ops']);
    const verifier = createKeyVerifier(keys, { readNames: config.readApiKeyNames });
    expect(verifier.verify('ops-secret-0002')).to.deep.equal({ name: 'ops', datasets: null, admin: false, read: true });
    expect(verifier.verify('bot-secret-0001')?.read).to.equal(false);
    expect(() => loadConfig({ API_KEYS: 'bot:bot-secret-0001', READ_API_KEY_NAMES: 'nobody' })).to.throw(/READ_API_KEY_NAMES .*nobody/);
  });

  it('mayReadDataset: admin reads any dataset; a read key its own datasets; a write-only key none', () => {
    const key = (o: { datasets?: string[] | null; admin?: boolean; read?: boolean }) => ({ name: 'k', datasets: o.datasets ?? null, admin: o.admin ?? false, read: o.read ?? false });
    expect(mayReadDataset(key({ admin: true, datasets: ['ds_a'] }), 'ds_x')).to.equal(true);
    expect(mayReadDataset(key({ read: true }), 'ds_x')).to.equal(true);
    expect(mayReadDataset(key({ read: true, datasets: ['ds_a'] }), 'ds_a')).to.equal(true);
    expect(mayReadDataset(key({ read: true, datasets: ['ds_a'] }), 'ds_x')).to.equal(false);
    expect(mayReadDataset(key({}), 'ds_x')).to.equal(false);
    expect(mayReadDataset(key({ datasets: ['ds_a'] }), 'ds_a')).to.equal(false);
  });

  it('a chain tries each verifier in order and stops at the first that knows the token', () => {
    const stored: KeyVerifier = { verify: (t) => (t === 'stored-secret' || t === 'bot-secret-0001' ? { name: 'stored', datasets: ['ds_a'], admin: false, read: false } : undefined) };
    const chain = chainKeyVerifiers(createKeyVerifier(keys), stored);
    expect(chain.verify('bot-secret-0001')?.name).to.equal('bot');
    expect(chain.verify('stored-secret')).to.deep.equal({ name: 'stored', datasets: ['ds_a'], admin: false, read: false });
    expect(chain.verify('nobody')).to.equal(undefined);
  });

  it('mayWriteDataset: null means any dataset, a list means those only', () => {
    expect(mayWriteDataset({ name: 'a', datasets: null, admin: false, read: false }, 'ds_x')).to.equal(true);
    expect(mayWriteDataset({ name: 'a', datasets: ['ds_a', 'ds_b'], admin: false, read: false }, 'ds_b')).to.equal(true);
    expect(mayWriteDataset({ name: 'a', datasets: ['ds_a'], admin: false, read: false }, 'ds_x')).to.equal(false);
    expect(mayWriteDataset({ name: 'a', datasets: [], admin: false, read: false }, 'ds_a')).to.equal(false);
  });
});
