import { promisify } from 'node:util';
import { constants, deflateRaw, deflateRawSync } from 'node:zlib';

/**
 * Text up to this length is deflated on the event loop, characters; longer on libuv's thread pool.
 * Handing a deflate to the pool costs about as much CPU again as the deflate itself (a stream, a
 * work item, a callback), which a small text (tens of KiB, ~0.1 ms of deflate) does not need; a
 * large one still keeps the loop free.
 */
const DEFLATE_ON_LOOP_MAX_LENGTH = 64 * 1024;
const deflateRawAsync = promisify(deflateRaw);

/** Deflate-raw of `text` at level 1 (the fastest: what it packs, job payloads and webhook batches, repeats most of its keys and text). */
export async function deflateText(text: string): Promise<Buffer> {
  const options = { level: constants.Z_BEST_SPEED };
  return text.length <= DEFLATE_ON_LOOP_MAX_LENGTH ? deflateRawSync(text, options) : deflateRawAsync(text, options);
}
