import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { createKeyVerifier } from '../../api/middleware/auth.js';
import { loadConfig } from '../../shared/config.js';

describe('createKeyVerifier (api/middleware/auth.ts)', () => {
  const hashed = 'hashed-key-secret-55';
  const keys = loadConfig({
    API_KEYS: `bot:bot-secret-0001,annotator:annotator-secret-02,hashed:sha256:${createHash('sha256').update(hashed).digest('hex')}`,
  }).apiKeys;
  const verifier = createKeyVerifier(keys);

  it('finds the key whose secret is the token', () => {
    expect(verifier.verify('bot-secret-0001')).to.deep.equal({ name: 'bot' });
    expect(verifier.verify('annotator-secret-02')).to.deep.equal({ name: 'annotator' });
  });

  it('finds a key configured as sha256:<digest>', () => {
    expect(verifier.verify(hashed)).to.deep.equal({ name: 'hashed' });
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
