import { expect } from 'chai';
import { isValidIdempotencyKey } from '../../api/idempotency.js';

describe('isValidIdempotencyKey (api/idempotency.ts)', () => {
  const valid: readonly [string, string][] = [
    ['one character', 'a'],
    ['a UUID', '9b2c7f0e-3c1a-4a8e-9f00-7d7d0a1c2b3c'],
    ['255 characters', 'k'.repeat(255)],
    ['inner spaces', 'order 42 retry'],
    ['every printable ASCII punctuation', '!"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}~'],
  ];
  for (const [name, key] of valid) {
    it(`accepts ${name}`, () => {
      expect(isValidIdempotencyKey(key)).to.equal(true);
    });
  }

  const invalid: readonly [string, string][] = [
    ['an empty key', ''],
    ['256 characters', 'k'.repeat(256)],
    ['a single space', ' '],
    ['a leading space', ' key'],
    ['a trailing space', 'key '],
    ['a tab', 'a\tb'],
    ['a newline', 'a\nb'],
    ['NUL', 'a\0b'],
    ['DEL', 'a\x7fb'],
    ['non-ASCII letters', 'clé'],
    ['an emoji', 'key-🙂'],
  ];
  for (const [name, key] of invalid) {
    it(`rejects ${name}`, () => {
      expect(isValidIdempotencyKey(key)).to.equal(false);
    });
  }
});
