import { authenticatedKey, type ApiContext } from '../state.js';
import { AppError } from '../../shared/errors.js';
import type { IdMinter } from '../../shared/ids.js';
import { FeedbackTokenBody } from '../../shared/schemas.js';
import type { FeedbackTokens } from '../feedback-tokens.js';
import { checkResponseTarget } from '../write-kinds.js';
import type { FeedbackTokenAnswer } from '../answers.js';
import { parseBody } from '../parse-input.js';

export const FEEDBACK_TOKENS_PATH = '/feedback-tokens';

interface FeedbackTokenRouteDeps {
  readonly ids: IdMinter;
  readonly tokens: FeedbackTokens;
  /** `FEEDBACK_TOKEN_MAX_TTL_SECONDS`: a longer `expires_in_seconds` is a 400. */
  readonly maxTtlSeconds: number;
}

/**
 * Mints a browser feedback token for a record the calling key may write: the server side of a
 * chatbot asks for one per conversation turn and hands it to its page.
 */
export function postFeedbackToken(deps: FeedbackTokenRouteDeps) {
  return async (ctx: ApiContext): Promise<void> => {
    const body = parseBody(FeedbackTokenBody, ctx.state.body);
    if (body.expires_in_seconds !== undefined && body.expires_in_seconds > deps.maxTtlSeconds) {
      const message = `must be at most ${deps.maxTtlSeconds} (FEEDBACK_TOKEN_MAX_TTL_SECONDS)`;
      throw new AppError('validation_failed', `expires_in_seconds ${message}`, { details: [{ path: 'expires_in_seconds', message }] });
    }
    const key = authenticatedKey(ctx);
    checkResponseTarget({ key, ids: deps.ids }, body.feedback_record_id);
    const questions = body.questions === undefined ? null : [...new Set(body.questions)];
    const scope = {
      recordId: body.feedback_record_id,
      userId: body.user_id,
      questions,
      issuedBy: key.name,
      ...(key.rateLimitPerMinute === undefined ? {} : { rateLimitPerMinute: key.rateLimitPerMinute }),
    };
    const minted = await deps.tokens.mint(scope, body.expires_in_seconds);
    // A bearer credential: no cache may keep it.
    ctx.set('Cache-Control', 'no-store');
    const answer: FeedbackTokenAnswer = {
      token: minted.token,
      token_type: 'Bearer',
      expires_at: minted.expiresAt.toISOString().replace('.000Z', 'Z'),
      expires_in_seconds: minted.expiresInSeconds,
      feedback_record_id: body.feedback_record_id,
      user_id: body.user_id,
      questions,
    };
    ctx.body = answer;
  };
}
