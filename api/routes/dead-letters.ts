import type { ApiParamsContext, ApiContext } from '../state.js';
import { DeadLetterListQuery, DeadLetterQueueError, type DeadLetterAdmin } from '../../shared/dead-letter-admin.js';
import { AppError } from '../../shared/errors.js';
import { parseQuery } from '../parse-input.js';
import type { DeadLetterPurged } from '../answers.js';

/** Where the dead-letter endpoints live; behind `authenticate` and `requireAdmin`. */
export const DEAD_LETTERS_PATH = '/admin/dead-letters';

/** The answer of a purge. */

interface DeadLetterRouteDeps {
  readonly deadLetters: DeadLetterAdmin;
  readonly retryAfterSeconds: number;
}

function notFound(id: string): AppError {
  return new AppError('not_found', `no dead letter has the id ${JSON.stringify(id)}`);
}

/** `GET /admin/dead-letters?reason=&limit=&cursor=`: newest first. */
export function listDeadLetters(deps: DeadLetterRouteDeps) {
  return async (ctx: ApiContext): Promise<void> => {
    const query = parseQuery(DeadLetterListQuery, ctx.query);
    ctx.body = await deps.deadLetters.list(query);
  };
}

/** `GET /admin/dead-letters/:id`: one dead letter with its payload. */
export function getDeadLetter(deps: DeadLetterRouteDeps) {
  return async (ctx: ApiParamsContext): Promise<void> => {
    const id = ctx.params['id']!;
    const letter = await deps.deadLetters.get(id);
    if (letter === undefined) throw notFound(id);
    ctx.body = letter;
  };
}

/** `POST /admin/dead-letters/:id/retry`: queue the write again, then drop the dead letter. */
export function retryDeadLetter(deps: DeadLetterRouteDeps) {
  return async (ctx: ApiParamsContext): Promise<void> => {
    const id = ctx.params['id']!;
    let outcome;
    try {
      outcome = await deps.deadLetters.retry(id);
    } catch (err) {
      if (!(err instanceof DeadLetterQueueError)) throw err;
      throw new AppError('queue_unavailable', 'the write could not be queued again; the dead letter is kept', { headers: { 'Retry-After': String(deps.retryAfterSeconds) }, cause: err });
    }
    if (outcome.outcome === 'not_found') throw notFound(id);
    if (outcome.outcome === 'not_retryable') throw new AppError('dead_letter_not_retryable', outcome.error);
    ctx.state.log?.info({ dead_letter_id: id, job_id: outcome.job_id, seq: outcome.seq }, 'dead letter re-queued');
    ctx.body = outcome;
  };
}

/** `DELETE /admin/dead-letters/:id`: purge one. */
export function deleteDeadLetter(deps: DeadLetterRouteDeps) {
  return async (ctx: ApiParamsContext): Promise<void> => {
    const id = ctx.params['id']!;
    if (!(await deps.deadLetters.purge(id))) throw notFound(id);
    ctx.state.log?.info({ dead_letter_id: id }, 'dead letter purged');
    ctx.body = { id, purged: true } satisfies DeadLetterPurged;
  };
}
