import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { chainKeyVerifiers, createKeyVerifier, mayWriteDataset, type KeyVerifier } from '../../api/middleware/auth.js';
import { loadConfig } from '../../shared/config.js';

describe('createKeyVerifier (api/middleware/auth.ts)', () => {
  const hashed = 'hashed-key-secret-55';
  const keys = loadConfig({
    API_KEYS: `bot:bot-secret-0001,annotator:annotator-secret-02,hashed:sha256:${createHash('sha256').update(hashed).digest('hex')}`,
  }).apiKeys;
  const verifier = createKeyVerifier(keys);

  it('finds the key whose secret is the token', () => {
    expect(verifier.verify('bot-secret-0001')).to.deep.equal({ name: 'bot', datasets: null, admin: false });
    expect(verifier.verify('annotator-secret-02')).to.deep.equal({ name: 'annotator', datasets: null, admin: false });
  });

  it('finds a key configured as sha256:<digest>', () => {
    expect(verifier.verify(hashed)).to.deep.equal({ name: 'hashed', datasets: null, admin: false });
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

  it('finds nothing when no key is configured', () => {
    expect(createKeyVerifier([]).verify('bot-secret-0001')).to.equal(undefined);
  });
});

describe('key scopes (api/middleware/auth.ts)', () => {
  const keys = loadConfig({ API_KEYS: 'bot:bot-secret-0001,ops:ops-secret-0002', ADMIN_API_KEY_NAMES: 'ops' }).apiKeys;

  it('gives the admin scope to the keys named in ADMIN_API_KEY_NAMES only', () => {
    const verifier = createKeyVerifier(keys, { adminNames: ['ops'] });
    expect(verifier.verify('ops-secret-0002')).to.deep.equal({ name: 'ops', datasets: null, admin: true });
    expect(verifier.verify('bot-secret-0001')).to.deep.equal({ name: 'bot', datasets: null, admin: false });
  });

  it('ADMIN_API_KEY_NAMES must name keys of API_KEYS', () => {
    expect(() => loadConfig({ API_KEYS: 'bot:bot-secret-0001', ADMIN_API_KEY_NAMES: 'bot,nobody' })).to.throw(/ADMIN_API_KEY_NAMES .*nobody/);
  });

  it('a chain tries each verifier in order and stops at the first that knows the token', () => {
    const stored: KeyVerifier = { verify: (t) => (t === 'stored-secret' || t === 'bot-secret-0001' ? { name: 'stored', datasets: ['ds_a'], admin: false } : undefined) };
    const chain = chainKeyVerifiers(createKeyVerifier(keys), stored);
    expect(chain.verify('bot-secret-0001')?.name).to.equal('bot');
    expect(chain.verify('stored-secret')).to.deep.equal({ name: 'stored', datasets: ['ds_a'], admin: false });
    expect(chain.verify('nobody')).to.equal(undefined);
  });

  it('mayWriteDataset: null means any dataset, a list means those only', () => {
    expect(mayWriteDataset({ name: 'a', datasets: null, admin: false }, 'ds_x')).to.equal(true);
    expect(mayWriteDataset({ name: 'a', datasets: ['ds_a', 'ds_b'], admin: false }, 'ds_b')).to.equal(true);
    expect(mayWriteDataset({ name: 'a', datasets: ['ds_a'], admin: false }, 'ds_x')).to.equal(false);
    expect(mayWriteDataset({ name: 'a', datasets: [], admin: false }, 'ds_a')).to.equal(false);
  });
});
