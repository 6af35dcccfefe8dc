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
    await next();
  };
  return [checkType, parse, requireBody];
}
