import type { IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';
import { createGunzip, createInflate } from 'node:zlib';
import getRawBody from 'raw-body';
import type { ApiContext, ApiMiddleware } from '../state.js';
import { AppError } from '../../shared/errors.js';

const JSON_TYPES = ['application/json', 'application/*+json'];

/** Strict: invalid UTF-8 throws instead of turning into U+FFFD, which would be stored in place of what was sent. */
const utf8 = new TextDecoder('utf-8', { fatal: true });

/** The request body as a stream of its bytes: inflated when it is gzip or deflate, else refused (415). */
function decodedStream(req: IncomingMessage): Readable {
  const encoding = (req.headers['content-encoding'] ?? 'identity').trim().toLowerCase();
  if (encoding === 'identity' || encoding === '') return req;
  if (encoding === 'gzip' || encoding === 'x-gzip') return req.pipe(createGunzip());
  if (encoding === 'deflate') return req.pipe(createInflate());
  throw new AppError('unsupported_media_type', `Content-Encoding ${encoding} is not supported (gzip, deflate or identity)`);
}

/**
 * How much of a too-large body is read and discarded before the 413, as a multiple of the limit
 * (at least {@link DISCARD_MIN_BYTES}). Beyond it the 413 is sent and the connection closed
 * unread, which the client may see as a reset: a bound on what a client can make us read.
 */
const DISCARD_LIMIT_MULTIPLE = 32;
/** Floor of the discard bound, bytes: 1 MiB. */
const DISCARD_MIN_BYTES = 1024 * 1024;

/**
 * Reads and drops the rest of `req` (up to `maxBytes` more). A socket closed with unread bytes in
 * its receive buffer sends a TCP reset, which can reach the client before it has read the 413
 * already written; once the body is read, the close is a clean FIN. Time is bounded by the
 * server's requestTimeout (408), which covers the whole body.
 */
function discardRest(req: IncomingMessage, maxBytes: number): Promise<void> {
  if (req.complete) return Promise.resolve();
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > maxBytes) return Promise.resolve();
  return new Promise((resolve) => {
    let read = 0;
    const finish = () => {
      req.off('data', onData).off('end', finish).off('close', finish);
      resolve();
    };
    const onData = (chunk: Buffer) => {
      read += chunk.length;
      if (read > maxBytes) finish();
    };
    // A Content-Encoding body was piped into a decompressor: the discarded bytes need no inflating.
    req.unpipe();
    req.on('data', onData).on('end', finish).on('close', finish);
    req.resume();
  });
}

/** Reads the whole body into one Buffer (raw-body: the limit, Content-Length checks, aborted requests). */
async function readBody(ctx: ApiContext, limitBytes: number): Promise<Buffer> {
  const stream = decodedStream(ctx.req);
  const length = ctx.req.headers['content-length'];
  try {
    // The declared length is checked only when it describes the bytes read (no Content-Encoding).
    return await getRawBody(stream, { limit: limitBytes, ...(stream === ctx.req && length !== undefined ? { length } : {}) });
  } catch (err) {
    const type = (err as { type?: unknown }).type;
    if (type === 'entity.too.large') {
      // The rest of the body is unread: on a keep-alive connection it would be parsed as the next
      // request. The 413 closes the connection, after reading that rest up to a bound.
      ctx.set('Connection', 'close');
      await discardRest(ctx.req, Math.max(DISCARD_MIN_BYTES, DISCARD_LIMIT_MULTIPLE * limitBytes));
      throw new AppError('payload_too_large', 'the body is larger than the limit');
    }
    // Compressed bytes that do not inflate (zlib's errors carry a Z_* code), a length mismatch, an aborted request.
    const zlibCode = (err as { code?: unknown }).code;
    if (stream !== ctx.req && typeof zlibCode === 'string' && zlibCode.startsWith('Z_')) {
      throw new AppError('invalid_json', `the body does not inflate as its Content-Encoding says (${String(ctx.req.headers['content-encoding']).trim().toLowerCase()})`, { cause: err });
    }
    throw new AppError('invalid_json', 'the body is not valid JSON', { cause: err });
  }
}

/**
 * 415 for a Content-Type that is not JSON (any charset is JSON: see checkType); a missing
 * Content-Type is read as JSON (chatbot integrations often omit it). Then the body is read with the size limit, decoded as strict UTF-8
 * and parsed into `ctx.state.body` (its size, bytes after any inflation, in
 * `ctx.state.bodyBytes`). An empty body is not JSON: 400 invalid_json. Non-object JSON ("x", 3, []) parses and then fails validation as "must be a JSON object"; "__proto__" keys
 * stay own properties (JSON.parse), reported by validation with their path.
 */
export function jsonBody(options: { limitBytes: number }): ApiMiddleware[] {
  /**
   * 415 unless JSON. Returns a note for the parse errors when a charset other than UTF-8 is
   * declared: JSON is UTF-8 (RFC 8259 §8.1, and "adding [a charset] really has no effect on
   * compliant recipients", §11), so any charset is accepted (SPEC.md) and the bytes are read as
   * UTF-8 all the same; strict decoding turns a body really in another encoding into a 400, never
   * into different text.
   */
  const checkType = (ctx: ApiContext): string => {
    const type = ctx.get('Content-Type');
    // What nearly every client sends needs no parsing; anything else is parsed (type-is, content-type).
    if (type === 'application/json' || type === 'application/json; charset=utf-8' || type.trim() === '') return '';
    if (ctx.is(JSON_TYPES) === false) {
      throw new AppError('unsupported_media_type', 'Content-Type must be application/json (or application/*+json)');
    }
    const charset = ctx.request.charset.toLowerCase();
    return charset === '' || charset === 'utf-8' || charset === 'utf8' ? '' : ` (JSON is read as UTF-8, whatever the charset parameter says: ${charset} was given)`;
  };
  // One middleware, not one per step: each layer of a Koa chain is a promise per request.
  const parse: ApiMiddleware = async (ctx, next) => {
    const note = checkType(ctx);
    const bytes = await readBody(ctx, options.limitBytes);
    ctx.state.bodyBytes = bytes.length;
    let text: string;
    try {
      text = utf8.decode(bytes);
    } catch {
      throw new AppError('invalid_json', `the body is not valid UTF-8${note}`);
    }
    if (text.trim() === '') throw new AppError('invalid_json', 'the body is empty; send a JSON object');
    try {
      ctx.state.body = JSON.parse(text) as unknown;
    } catch {
      throw new AppError('invalid_json', `the body is not valid JSON${note}`);
    }
    await next();
  };
  return [parse];
}
