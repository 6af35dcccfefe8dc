import type { Db } from 'mongodb';
import * as v from 'valibot';
import { CompletionRule } from '../shared/dataset-definition.js';
import type { Logger } from '../shared/logger.js';
import { COLLECTIONS } from '../shared/mongo.js';
import { storeCall } from './errors.js';

/** The completion rules of the dataset definitions, as the worker reads them. */
export interface CompletionRules {
  /**
   * The rules of `datasetIds` as stored now (a dataset without a rule, or without a definition,
   * is absent). Throws {@link TransientStoreError} when the store cannot be reached.
   */
  rulesOf(datasetIds: readonly string[]): Promise<ReadonlyMap<string, CompletionRule>>;
}

/**
 * The `completion` rules of `feedback_datasets`, read from the store for each store round's
 * datasets (one `_id` lookup per round): the rule a round applies is the one stored when it read
 * it, so a rule that a `PUT /datasets/{id}` answered 201 applies to every write accepted after
 * that answer (the round that stores it reads later still), with no reload period in between.
 * A rule that does not parse (a document edited by hand) counts as no rule, and is logged once.
 */
export function createCompletionRules(options: { db: Db; logger: Logger }): CompletionRules {
  const { db, logger } = options;
  const col = db.collection<{ _id: string; completion?: unknown }>(COLLECTIONS.datasets);
  const reported = new Set<string>();
  return {
    async rulesOf(datasetIds) {
      const rules = new Map<string, CompletionRule>();
      const ids = [...new Set(datasetIds)];
      if (ids.length === 0) return rules;
      const docs = await storeCall(() => col.find({ _id: { $in: ids }, completion: { $exists: true } }, { projection: { completion: 1 } }).toArray());
      for (const doc of docs) {
        const parsed = v.safeParse(CompletionRule, doc.completion);
        if (parsed.success) rules.set(String(doc._id), parsed.output);
        else if (!reported.has(String(doc._id))) {
          reported.add(String(doc._id));
          logger.warn({ dataset_id: doc._id }, 'stored completion rule does not follow the rules; the dataset is treated as having none');
        }
      }
      return rules;
    },
  };
}

/** The rules a store round has read: of the datasets in `read` (those without a rule are absent from `rules`). */
export interface RuleSnapshot {
  readonly read: ReadonlySet<string>;
  readonly rules: ReadonlyMap<string, CompletionRule>;
}

/** No dataset read yet. */
export const NO_RULES_READ: RuleSnapshot = { read: new Set(), rules: new Map() };

/** `held`, with the rules of the datasets among `datasetIds` that it has not read yet read now (none: `held` itself). */
export async function withRulesOf(rules: CompletionRules, datasetIds: Iterable<string>, held: RuleSnapshot): Promise<RuleSnapshot> {
  const missing = [...new Set(datasetIds)].filter((id) => !held.read.has(id));
  if (missing.length === 0) return held;
  const more = await rules.rulesOf(missing);
  return { read: new Set([...held.read, ...missing]), rules: new Map([...held.rules, ...more]) };
}
