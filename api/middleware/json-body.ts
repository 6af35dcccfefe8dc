import { isUtf8 } from 'node:buffer';
import type { IncomingMessage } from 'node:http';
import bodyParser from 'koa-bodyparser';
import type { Middleware } from 'koa';
import { AppError } from '../../shared/errors.js';

const JSON_TYPES = ['application/json', 'application/*+json'];

/**
 * How much of a too-large body is read and discarded before the 413, as a multiple of the limit
 * (at least {@link DISCARD_MIN_BYTES}). Beyond it the 413 is sent and the connection closed
 * unread, which the client may see as a reset: a bound on what a client can make us read.
 */
const DISCARD_LIMIT_MULTIPLE = 32;
/** Floor of the discard bound, bytes: 1 MiB. */
const DISCARD_MIN_BYTES = 1024 * 1024;

/**
 * Reads and drops the rest of `req` (up to `maxBytes` more), resolving whether it reached its end.
 * A socket closed with unread bytes in its receive buffer sends a TCP reset, which can reach the
 * client before it has read the 413 already written; once the body is read, the close is a clean
 * FIN. Time is bounded by the server's requestTimeout (408), which covers the whole body.
 */
function discardRest(req: IncomingMessage, maxBytes: number): Promise<boolean> {
  if (req.complete) return Promise.resolve(true);
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > maxBytes) return Promise.resolve(false);
  return new Promise((resolve) => {
    let read = 0;
    const finish = (complete: boolean) => {
      req.off('data', onData).off('end', onEnd).off('close', onClose);
      resolve(complete);
    };
    const onData = (chunk: Buffer) => {
      read += chunk.length;
      if (read > maxBytes) finish(false);
    };
    const onEnd = () => finish(true);
    const onClose = () => finish(req.complete);
    // A Content-Encoding body was piped into a decompressor: the discarded bytes need no inflating.
    req.unpipe();
    req.on('data', onData).on('end', onEnd).on('close', onClose);
    req.resume();
  });
}

function isTooLarge(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const { type, status } = err as { type?: unknown; status?: unknown };
  return type === 'entity.too.large' || status === 413;
}

/**
 * 415 for a Content-Type that is not JSON; a missing Content-Type is read as JSON (chatbot
 * integrations often omit it). Then koa-bodyparser parses with the size limit; its errors are
 * mapped to our codes by the error middleware. An empty body is not JSON: 400 invalid_json.
 */
export function jsonBody(options: { limitBytes: number }): Middleware[] {
  const checkType: Middleware = async (ctx, next) => {
    const type = ctx.get('Content-Type');
    if (type.trim() === '') ctx.req.headers['content-type'] = 'application/json';
    else if (ctx.is(JSON_TYPES) === false) {
      throw new AppError('unsupported_media_type', 'Content-Type must be application/json (or application/*+json)');
    }
    // JSON is UTF-8 (RFC 8259 §8.1): another charset would be decoded into different text.
    const charset = ctx.request.charset.toLowerCase();
    if (charset !== '' && charset !== 'utf-8' && charset !== 'utf8') {
      throw new AppError('unsupported_media_type', 'the charset must be utf-8 (JSON is UTF-8)');
    }
    await next();
  };
  /**
   * The parser decodes invalid UTF-8 into U+FFFD, which would be stored in place of what was sent.
   * The raw bytes are kept (references to the chunks the parser reads anyway) and, only when the
   * decoded text holds a U+FFFD, checked. Compressed bodies are checked by zlib's own decoding only.
   */
  const keepBytes: Middleware = async (ctx, next) => {
    const encoding = ctx.get('Content-Encoding').trim().toLowerCase();
    if (encoding !== '' && encoding !== 'identity') return next();
    const chunks: Buffer[] = [];
    let kept = 0;
    // Attached in the same tick as the parser's own listener (the middleware chain below runs
    // synchronously up to the read), so both see every chunk. Past the limit the body is a 413 and
    // its bytes are never checked: keeping them would hold what a client sends in memory.
    ctx.req.on('data', (chunk: Buffer) => {
      kept += chunk.length;
      if (kept <= options.limitBytes) chunks.push(chunk);
    });
    ctx.state['rawBodyChunks'] = chunks;
    await next();
  };
  const parse = bodyParser({
    enableTypes: ['json'],
    extendTypes: { json: JSON_TYPES },
    jsonLimit: `${options.limitBytes}b`,
    // Non-object JSON ("x", 3, []) is valid JSON: it parses and then fails validation as "must be a JSON object".
    strict: false,
    onerror: (err) => {
      throw err;
    },
    // co-body's parser throws on "__proto__" keys by default, which would answer invalid_json for
    // valid JSON; kept as own properties, they are reported by validation with their path.
    ...({ onProtoPoisoning: 'ignore' } as object),
  });
  const discardBound = Math.max(DISCARD_MIN_BYTES, DISCARD_LIMIT_MULTIPLE * options.limitBytes);
  /**
   * The parser stops reading at the limit (or before reading, for a Content-Length over it) and
   * leaves the rest of the body unread. The 413 then closes the connection (`Connection: close`):
   * the unread rest would otherwise be parsed as the next request on a keep-alive connection.
   */
  const parseWithinLimit: Middleware = async (ctx, next) => {
    try {
      await parse(ctx, async () => undefined);
    } catch (err) {
      if (isTooLarge(err)) {
        ctx.set('Connection', 'close');
        await discardRest(ctx.req, discardBound);
      }
      throw err;
    }
    await next();
  };
  const requireBody: Middleware = async (ctx, next) => {
    const raw: unknown = ctx.request.rawBody;
    if (typeof raw !== 'string' || raw.trim() === '') {
      throw new AppError('invalid_json', 'the body is empty; send a JSON object');
    }
    const chunks = ctx.state['rawBodyChunks'] as Buffer[] | undefined;
    if (chunks !== undefined && raw.includes('\uFFFD') && !isUtf8(Buffer.concat(chunks))) {
      throw new AppError('invalid_json', 'the body is not valid UTF-8');
    }
    await next();
  };
  return [checkType, keepBytes, parseWithinLimit, requireBody];
}
