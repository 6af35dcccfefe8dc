import { isUtf8 } from 'node:buffer';
import bodyParser from 'koa-bodyparser';
import type { Middleware } from 'koa';
import { AppError } from '../../shared/errors.js';

const JSON_TYPES = ['application/json', 'application/*+json'];

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
    // Attached in the same tick as the parser's own listener (the middleware chain below runs
    // synchronously up to the read), so both see every chunk.
    ctx.req.on('data', (chunk: Buffer) => chunks.push(chunk));
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
  return [checkType, keepBytes, parse, requireBody];
}
