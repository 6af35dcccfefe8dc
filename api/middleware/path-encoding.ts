import { invalidInput } from '../parse-input.js';
import type { ApiMiddleware } from '../state.js';

/**
 * 400 for a path whose percent-encoding does not decode (`/datasets/%E0%A4%A/records`): the
 * router would otherwise take the undecodable text as the dataset id or record id itself and
 * answer for an id the client never meant. Only paths holding `%` are looked at.
 */
export function pathEncoding(): ApiMiddleware {
  return (ctx, next) => {
    const path = ctx.path;
    if (path.includes('%')) {
      try {
        decodeURIComponent(path);
      } catch {
        throw invalidInput('path', 'is not valid percent-encoding (a % must start a %XX escape of UTF-8 bytes)');
      }
    }
    return next();
  };
}
