import type { ResponseVersionDoc } from '../shared/documents.js';
import type { ResponseCarrying, ResponseUpdate } from './documents.js';

/** A write's version as its response's history keeps it once a later one replaces it. */
function versionOf(item: ResponseCarrying): ResponseVersionDoc {
  const w = item.write;
  return { status: w.response.status, values: w.response.values, seq: item.seq, updated_at: new Date(w.accepted_at), request_id: w.request_id };
}

/** Client data goes in as `$literal`: a string value such as "$x" would otherwise read as a field path. */
const literal = (value: unknown) => ({ $literal: value });
const STORED_SEQ = { $ifNull: ['$seq', -1] };

/**
 * The conditional upsert of a response version (as documents.ts `responseUpdate`: filter
 * `{_id, seq: {$lte: mine}}`, a duplicate key when a later version is stored) that also moves
 * the version it replaces into `history`, in the same single-document update, so that the
 * history cannot disagree with the response. What goes into `history`, oldest first:
 *
 * - the stored version, when this one is later (`seq` strictly lower than ours; a job run again
 *   meets its own `seq` and leaves the history as it is, so a re-run adds nothing);
 * - `older`: the versions of the same response that the round holds between the stored one and
 *   this one (the writer writes only the newest of a round), those later than the stored one;
 *
 * then cut to the newest `cap` entries: the oldest versions are dropped first. A stale version
 * (a later one is stored) matches nothing and so leaves no entry.
 *
 * `createdAt` is the time of the pair's earliest version the caller knows of, as `$setOnInsert`
 * would give it (a pipeline has no `$setOnInsert`: `$ifNull` keeps a stored value).
 */
export function responseUpdateWithHistory(item: ResponseCarrying, older: readonly ResponseCarrying[], datasetId: string, createdAt: number, cap: number): ResponseUpdate {
  const w = item.write;
  const between = [...older].sort((a, b) => a.seq - b.seq).map(versionOf);
  const stored = { status: '$status', values: '$values', seq: '$seq', updated_at: '$updated_at', request_id: '$request_id' };
  const history = {
    $cond: [
      { $lt: [STORED_SEQ, item.seq] },
      {
        $slice: [
          {
            $concatArrays: [
              { $ifNull: ['$history', []] },
              // An upsert that inserts starts from `{_id}` alone: no stored version to keep.
              { $cond: [{ $eq: [{ $type: '$seq' }, 'missing'] }, [], [stored]] },
              { $filter: { input: literal(between), cond: { $gt: ['$$this.seq', STORED_SEQ] } } },
            ],
          },
          -cap,
        ],
      },
      { $ifNull: ['$history', []] },
    ],
  };
  const keep = (field: string, value: unknown) => ({ $ifNull: [`$${field}`, literal(value)] });
  return {
    filter: { _id: w.response_id, seq: { $lte: item.seq } },
    update: [
      { $set: { history } },
      {
        $set: {
          status: literal(w.response.status),
          values: literal(w.response.values),
          seq: literal(item.seq),
          api_key: literal(w.api_key),
          request_id: literal(w.request_id),
          updated_at: literal(new Date(w.accepted_at)),
          feedback_record_id: keep('feedback_record_id', w.record_id),
          feedback_dataset_id: keep('feedback_dataset_id', datasetId),
          user_id: keep('user_id', w.response.user_id),
          created_at: keep('created_at', new Date(createdAt)),
          // The order of the version that inserted the document (webhooks' response.created), as responseUpdate's $setOnInsert.
          created_seq: { $cond: [{ $eq: [{ $type: '$seq' }, 'missing'] }, literal(item.seq), '$created_seq'] },
        },
      },
    ],
  };
}
