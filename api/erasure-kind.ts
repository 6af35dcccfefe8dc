import { AppError } from '../shared/errors.js';
import { ErasureAccepted, newErasureId } from '../shared/erasures.js';
import { ErasureBody } from '../shared/schemas.js';
import { type Write } from '../shared/writes.js';
import type { WriteKind } from './write-kinds.js';

/*
 * `POST /admin/erasures`: an erasure is a write like the others (docs/erasure.md). It goes through
 * the one write pipeline so that it gets its acceptance order (`seq`) from the same clock, at the
 * same step, as every write it must be ordered with; the worker erases what the user wrote below
 * that order and drops anything below it that arrives later.
 */

function erasureAccepted(write: Write): ErasureAccepted {
  return { erasure_id: write.record_id, status: 'pending' };
}

export const erasureKind: WriteKind<ErasureBody, ErasureAccepted> = {
  path: '/admin/erasures',
  endpoint: 'admin-erasures',
  schema: ErasureBody,
  feedbackToken: false,
  accepted: { status: 202, answer: erasureAccepted },
  check(_body, wc) {
    if (!wc.key.admin) throw new AppError('forbidden', 'this API key has no admin scope');
  },
  build(body, wc, seed) {
    const id = newErasureId(wc.ids, seed);
    const write: Write = {
      kind: 'erasure',
      request_id: wc.requestId,
      accepted_at: Date.now(),
      api_key: wc.key.name,
      // The erasure id stands for both ids: it picks the shard and names a dead letter like a write's.
      record_id: id,
      response_id: id,
      erasure: { user_id: body.user_id, ...(body.datasets === undefined ? {} : { datasets: body.datasets }), records: body.records },
    };
    return { write, answer: erasureAccepted(write) };
  },
  openapi: {
    operationId: 'postErasure',
    summary: "Erase a user's feedback (admin)",
    description:
      'GDPR Art. 17 / CCPA deletion of one `user_id`: every response (and, by `records`, record) of that user accepted before this call\'s 202 is removed, ' +
      'including writes still queued and writes retried later; writes accepted after the 202 are stored normally. Ordered by the acceptance order, not by clocks. ' +
      '`records`: `created` (default) also erases the records the user created (their first response was the user\'s) with every response to them; ' +
      '`created_and_orphaned` also the records left with no response; `keep` keeps every record. Poll `GET /admin/erasures/{erasure_id}`. See docs/erasure.md.',
    codes: [],
    access: 'admin',
    answer: { status: 202, description: 'The erasure is queued, ordered after every write acknowledged before it.', json: ErasureAccepted },
  },
};
