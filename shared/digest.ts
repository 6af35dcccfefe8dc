import * as crypto from 'node:crypto';

/**
 * SHA-256 of `data` (a string is hashed as UTF-8). One call of `crypto.hash` (Node >= 20.12)
 * creates no Hash object, which is most of what a digest of a few dozen bytes costs through
 * `createHash`; older Node takes that path.
 */
export const sha256: (data: string | Buffer) => Buffer =
  typeof crypto.hash === 'function' ? (data) => crypto.hash('sha256', data, 'buffer') : (data) => crypto.createHash('sha256').update(data).digest();

/** SHA-256's block size, bytes (RFC 2104's B). */
const BLOCK_BYTES = 64;
const DIGEST_BYTES = 32;

/**
 * HMAC-SHA256 under `key` (RFC 2104: H((K ^ opad) || H((K ^ ipad) || message))), the same bytes
 * as `createHmac('sha256', key)`, built from two {@link sha256} calls on buffers padded once:
 * a `createHmac` per message would import the key and create an HMAC object every time.
 */
export function hmacSha256(key: Buffer): (message: Buffer) => Buffer {
  const k = key.length > BLOCK_BYTES ? sha256(key) : key;
  let inner = Buffer.alloc(BLOCK_BYTES + 64, 0x36);
  const outer = Buffer.alloc(BLOCK_BYTES + DIGEST_BYTES, 0x5c);
  for (let i = 0; i < k.length; i++) {
    inner[i] = k[i]! ^ 0x36;
    outer[i] = k[i]! ^ 0x5c;
  }
  return (message) => {
    if (BLOCK_BYTES + message.length > inner.length) {
      const grown = Buffer.alloc(BLOCK_BYTES + message.length);
      inner.copy(grown, 0, 0, BLOCK_BYTES);
      inner = grown;
    }
    message.copy(inner, BLOCK_BYTES);
    sha256(inner.subarray(0, BLOCK_BYTES + message.length)).copy(outer, BLOCK_BYTES);
    return sha256(outer);
  };
}
