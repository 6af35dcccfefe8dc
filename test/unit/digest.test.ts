import * as crypto from 'node:crypto';
import { expect } from 'chai';
import { hmacSha256, sha256 } from '../../shared/digest.js';

describe('SHA-256 and HMAC-SHA256 (shared/digest.ts)', () => {
  it('sha256 gives the bytes of createHash, for strings (as UTF-8) and buffers', () => {
    for (const input of ['', 'abc', 'é→𝄞 \0 nul', 'x'.repeat(1000)]) {
      expect(sha256(input).equals(crypto.createHash('sha256').update(input, 'utf8').digest()), input).to.equal(true);
      const bytes = Buffer.from(input, 'utf8');
      expect(sha256(bytes).equals(crypto.createHash('sha256').update(bytes).digest())).to.equal(true);
    }
  });

  it('hmacSha256 gives the bytes of createHmac for keys shorter than, as long as and longer than a block, and messages of any length', () => {
    for (const keyLength of [0, 1, 31, 63, 64, 65, 130]) {
      const key = crypto.randomBytes(keyLength);
      const mac = hmacSha256(key);
      // Growing, shrinking and growing again: the padded buffers are reused between messages.
      for (const messageLength of [0, 26, 200, 5, 64, 1000, 1]) {
        const message = crypto.randomBytes(messageLength);
        const expected = crypto.createHmac('sha256', key).update(message).digest();
        expect(mac(message).equals(expected), `key ${keyLength} B, message ${messageLength} B`).to.equal(true);
      }
    }
  });

  it('hmacSha256 keeps each result: a later call does not change an earlier digest', () => {
    const mac = hmacSha256(Buffer.from('secret'));
    const first = mac(Buffer.from('one'));
    const copy = Buffer.from(first);
    mac(Buffer.from('two'));
    expect(first.equals(copy)).to.equal(true);
  });
});
