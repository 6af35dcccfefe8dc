import type { StoredEvent } from '../shared/webhook-events.js';
import type { ErasedResponse, OnErased } from './erasure-guard.js';
import type { EventOutbox } from './event-outbox.js';

/**
 * `response.erased`: one event per response an erasure removes, appended to the outbox before the
 * response is deleted (`ErasureHooks.removing`): a failed append leaves the response stored, so
 * that the job's retry finds and reports it again, which nothing could after the delete. Its order
 * is the erasure's (above every version of the response it removes) and its id names the response
 * and that order, so that every report of one removal (a job run again, the sweep and a store
 * round's guard finding the same response) is kept once.
 */
export function createErasureEvents(options: { readonly outbox: EventOutbox }): OnErased {
  return async (removed) => {
    if (!options.outbox.active()) return;
    await options.outbox.append(removed.map(erasedEvent));
  };
}

function erasedEvent({ doc, erasure }: ErasedResponse): StoredEvent {
  return {
    type: 'response.erased',
    seq: erasure.seq,
    recordId: doc.feedback_record_id,
    subjectId: doc._id,
    datasetId: doc.feedback_dataset_id,
    at: erasure.at,
    data: { feedback_response_id: doc._id, feedback_record_id: doc.feedback_record_id, feedback_dataset_id: doc.feedback_dataset_id, erasure_id: erasure.id },
  };
}
