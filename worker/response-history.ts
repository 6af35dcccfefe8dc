import type { Document } from 'mongodb';
import type { ResponseDoc, ResponseVersionDoc } from '../shared/documents.js';
import { responseUpdate, type ResponseCarrying, type ResponseUpdate } from './documents.js';

/** A write's version as its response's history keeps it. */
function versionOf(item: ResponseCarrying): ResponseVersionDoc {
  const w = item.write;
  return { status: w.response.status, values: w.response.values, seq: item.seq, updated_at: new Date(w.accepted_at), request_id: w.request_id };
}

/** A first response inserted with its history on: `history` holds it, as the updates below keep it. */
export function withHistory(doc: ResponseDoc): ResponseDoc {
  const version: ResponseVersionDoc = { status: doc.status, values: doc.values, seq: doc.seq, updated_at: doc.updated_at, request_id: doc.request_id };
  return { ...doc, history: [version], history_has_current: true };
}

/** Client data goes in as `$literal`: a string value such as "$x" would otherwise read as a field path. */
const literal = (value: unknown) => ({ $literal: value });
const STORED_SEQ = { $ifNull: ['$seq', -1] };

/**
 * The conditional upsert of a response version (as documents.ts `responseUpdate`: a stored later
 * version makes it a duplicate key, then "stale") that also keeps the version in the response's
 * `history`, in the same single-document update, so that the history cannot disagree with the
 * response. `history` holds the response's versions oldest first, the stored one last
 * (`history_has_current`), at most `cap` earlier ones: the oldest are dropped first.
 *
 * `older` are the versions of the same response that the round holds below this one (the writer
 * writes only the newest of a round): those later than the stored one go into the history too, so
 * an update is not lost from it because two came close together. A stale version (a later one is
 * stored) matches nothing and leaves no entry; a job run again meets its own `seq` and leaves the
 * history as it is.
 *
 * Two forms, the quick one first:
 *
 * - **quick**: `$set` of the version and `$push` of it (and of `older`) onto `history`, cut by
 *   `$slice`. Its filter matches only a document whose `history` ends with its stored version
 *   (`history_has_current`) and whose stored version is older than every version pushed, so that
 *   appending is exactly right. A new response is inserted by it (upsert).
 * - **general** (`recheck`, run when the quick one met a duplicate key: updates.ts): an update with
 *   an aggregation pipeline that rebuilds `history` from what is stored, whatever its form (a
 *   document of an earlier release held only the earlier versions; one stored while
 *   RESPONSE_HISTORY_MAX was 0 has none), and from `older` later than the stored version. It
 *   matches this version or an earlier one, as `responseUpdate` does; a miss is "stale".
 *
 * The quick form costs the store about what a plain `$set` does; the pipeline about 1.4× as much
 * (bench/history-update-costs.ts, docs/annotation.md).
 *
 * `createdAt` is the time of the pair's earliest version the caller knows of, as `$setOnInsert`
 * gives it.
 */
export function responseUpdateWithHistory(item: ResponseCarrying, older: readonly ResponseCarrying[], datasetId: string, createdAt: number, cap: number): ResponseUpdate {
  const w = item.write;
  const between = [...older].sort((a, b) => a.seq - b.seq).map(versionOf);
  const mine = versionOf(item);
  const plain = responseUpdate(item, datasetId, createdAt).update as Document;
  const lowest = between[0]?.seq ?? item.seq;
  return {
    // Upserted, the equality `history_has_current: true` is part of the inserted document.
    filter: { _id: w.response_id, seq: { $lt: lowest }, history_has_current: true },
    update: { $set: plain['$set'], $setOnInsert: plain['$setOnInsert'], $push: { history: { $each: [...between, mine], $slice: -(cap + 1) } } },
    recheck: () => ({ filter: { _id: w.response_id, seq: { $lte: item.seq } }, update: rebuildingUpdate(item, between, mine, datasetId, createdAt, cap) }),
  };
}

/** The general form: a pipeline that makes `history` the earlier versions stored, the stored version, `between` later than it, and this one. */
function rebuildingUpdate(item: ResponseCarrying, between: readonly ResponseVersionDoc[], mine: ResponseVersionDoc, datasetId: string, createdAt: number, cap: number): Document[] {
  const w = item.write;
  const stored = { status: '$status', values: '$values', seq: '$seq', updated_at: '$updated_at', request_id: '$request_id' };
  const history = {
    $slice: [
      {
        $concatArrays: [
          // Versions before the stored one (in either form, `history` holds no later one).
          { $filter: { input: { $ifNull: ['$history', []] }, cond: { $lt: ['$$this.seq', STORED_SEQ] } } },
          // The stored version, unless it is this one (a job run again); an insert has none.
          { $cond: [{ $and: [{ $ne: [{ $type: '$seq' }, 'missing'] }, { $lt: ['$seq', item.seq] }] }, [stored], []] },
          { $filter: { input: literal(between), cond: { $gt: ['$$this.seq', STORED_SEQ] } } },
          [literal(mine)],
        ],
      },
      -(cap + 1),
    ],
  };
  const keep = (field: string, value: unknown) => ({ $ifNull: [`$${field}`, literal(value)] });
  return [
    { $set: { history, history_has_current: literal(true) } },
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
  ];
}
