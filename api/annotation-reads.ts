import type { Db } from 'mongodb';
import type { ProgressBody, RecordHistoryBody, ResponseVersionView } from '../shared/answers.js';
import type { CompletionRule } from '../shared/dataset-definition.js';
import { earlierVersions, type RecordDoc, type ResponseDoc, type ResponseVersionDoc } from '../shared/documents.js';
import { COLLECTIONS } from '../shared/mongo.js';
import { createProgressCache, PROGRESS_CACHE_DEFAULTS, type ProgressCacheSettings } from './progress-cache.js';

/** The annotation lead's reads: a record's response history, a dataset's progress. Never writes. */
export interface AnnotationReader {
  /** Every response of the record with its versions, oldest first; undefined when the record is not stored (yet). */
  history(recordId: string): Promise<RecordHistoryBody | undefined>;
  /** Records by completion status, responses by status, per annotator. */
  progress(datasetId: string, rule: CompletionRule | undefined): Promise<ProgressBody>;
}

const RESPONSE_STATUSES = ['submitted', 'draft', 'discarded'] as const;
type ResponseStatusName = (typeof RESPONSE_STATUSES)[number];

function versionView(v: Pick<ResponseVersionDoc, 'status' | 'values' | 'seq' | 'updated_at'>): ResponseVersionView {
  return { status: v.status, values: v.values, updated_at: v.updated_at.toISOString(), seq: v.seq };
}

const zero = (): Record<ResponseStatusName, number> => ({ submitted: 0, draft: 0, discarded: 0 });

export function createAnnotationReader(options: { db: Db; progressCache?: ProgressCacheSettings }): AnnotationReader {
  const records = options.db.collection<RecordDoc>(COLLECTIONS.records);
  const responses = options.db.collection<ResponseDoc>(COLLECTIONS.responses);
  // Large datasets' counts are kept a while (api/progress-cache.ts); small ones are counted on every call.
  const progressCache = createProgressCache<Omit<ProgressBody, 'as_of' | 'completion'>>(options.progressCache ?? PROGRESS_CACHE_DEFAULTS);

  return {
    async history(recordId) {
      const [record, docs] = await Promise.all([
        records.findOne({ _id: recordId }, { projection: { feedback_dataset_id: 1 } }),
        responses.find({ feedback_record_id: recordId }, { projection: { user_id: 1, status: 1, values: 1, seq: 1, updated_at: 1, created_at: 1, history: 1 } }).toArray(),
      ]);
      if (record === null) return undefined;
      docs.sort((a, b) => a.created_at.getTime() - b.created_at.getTime() || (a._id < b._id ? -1 : 1));
      return {
        feedback_record_id: recordId,
        feedback_dataset_id: record.feedback_dataset_id,
        responses: docs.map((doc) => ({
          feedback_response_id: doc._id,
          user_id: doc.user_id,
          versions: [...earlierVersions(doc).map(versionView), versionView(doc)],
        })),
      };
    },

    async progress(datasetId, rule) {
      const { value, asOf } = await progressCache.get(datasetId, () => countProgress(datasetId));
      const completion = rule === undefined ? null : { min_submitted: rule.min_submitted };
      return { feedback_dataset_id: value.feedback_dataset_id, completion, records: value.records, responses: value.responses, annotators: value.annotators, as_of: asOf.toISOString() };
    },
  };

  /**
   * Counts on indexes: records by (dataset, status, …) (`dataset_status_created_id`), and one
   * pass over the dataset's responses grouped by (annotator, status). See docs/annotation.md
   * for what this costs at a million records.
   */
  async function countProgress(datasetId: string): Promise<Omit<ProgressBody, 'as_of' | 'completion'>> {
    const [total, pending, completed, groups] = await Promise.all([
      records.countDocuments({ feedback_dataset_id: datasetId }),
      records.countDocuments({ feedback_dataset_id: datasetId, status: 'pending' }),
      records.countDocuments({ feedback_dataset_id: datasetId, status: 'completed' }),
      responses
        .aggregate<{ _id: { user_id: string; status: string }; n: number }>([
          { $match: { feedback_dataset_id: datasetId } },
          { $group: { _id: { user_id: '$user_id', status: '$status' }, n: { $sum: 1 } } },
        ])
        .toArray(),
    ]);
    const byStatus = zero();
    const byAnnotator = new Map<string, Record<ResponseStatusName, number>>();
    for (const g of groups) {
      const status = g._id.status as ResponseStatusName;
      if (!RESPONSE_STATUSES.includes(status)) continue;
      byStatus[status] += g.n;
      let counts = byAnnotator.get(g._id.user_id);
      if (counts === undefined) byAnnotator.set(g._id.user_id, (counts = zero()));
      counts[status] += g.n;
    }
    return {
      feedback_dataset_id: datasetId,
      records: { total, pending, completed },
      responses: byStatus,
      annotators: [...byAnnotator.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([user_id, counts]) => ({ user_id, ...counts })),
    };
  }
}
