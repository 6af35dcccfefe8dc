import type { Db } from 'mongodb';
import * as v from 'valibot';
import { CompletionRule } from '../shared/dataset-definition.js';
import type { Logger } from '../shared/logger.js';
import { COLLECTIONS } from '../shared/mongo.js';

/** The completion rules of the dataset definitions, as the worker holds them. */
export interface CompletionRules {
  /** The rule of a dataset; undefined when its definition has none (or there is no definition). */
  ruleOf(datasetId: string): CompletionRule | undefined;
  /** Loads now (bounded by `timeoutMs`; a failure keeps the rules held), then every `refreshMs`. */
  start(timeoutMs: number): Promise<void>;
  /** One load now; false when MongoDB did not answer. */
  refresh(): Promise<boolean>;
  /** Stops reloading and waits for a load in flight. */
  close(): Promise<void>;
}

/**
 * The `completion` rules of `feedback_datasets`, reloaded every `refreshMs` (DATASETS_REFRESH_MS,
 * as the API reloads the definitions): a rule added or changed applies to the responses stored
 * after the worker loaded it. A rule that does not parse (a document edited by hand) counts as no
 * rule, and is logged once.
 */
export function createCompletionRules(options: { db: Db; refreshMs: number; logger: Logger }): CompletionRules {
  const { db, refreshMs, logger } = options;
  const col = db.collection<{ _id: string; completion?: unknown }>(COLLECTIONS.datasets);
  let rules: ReadonlyMap<string, CompletionRule> = new Map();
  let timer: NodeJS.Timeout | undefined;
  /** The last load asked for: loads run one after another, never overlapping. */
  let chain: Promise<boolean> = Promise.resolve(true);
  let stopped = false;
  let failing = false;
  const reported = new Set<string>();

  async function load(timeoutMs?: number): Promise<boolean> {
    try {
      const docs = await col.find({ completion: { $exists: true } }, { projection: { completion: 1 }, ...(timeoutMs === undefined ? {} : { timeoutMS: timeoutMs }) }).toArray();
      const next = new Map<string, CompletionRule>();
      for (const doc of docs) {
        const parsed = v.safeParse(CompletionRule, doc.completion);
        if (parsed.success) next.set(String(doc._id), parsed.output);
        else if (!reported.has(String(doc._id))) {
          reported.add(String(doc._id));
          logger.warn({ dataset_id: doc._id }, 'stored completion rule does not follow the rules; the dataset is treated as having none');
        }
      }
      rules = next;
      if (failing) logger.info({ datasets: next.size }, 'completion rules loaded again');
      failing = false;
      return true;
    } catch (err) {
      if (!failing) logger.warn({ err: (err as Error).message, datasets: rules.size }, 'could not load the completion rules; keeping the last loaded ones');
      failing = true;
      return false;
    }
  }

  function refresh(timeoutMs?: number): Promise<boolean> {
    // A load that starts after the one in flight sees what was written meanwhile.
    chain = chain.then(() => load(timeoutMs));
    return chain;
  }

  function schedule(): void {
    if (stopped) return;
    timer = setTimeout(() => void refresh().then(schedule), refreshMs);
    timer.unref();
  }

  return {
    ruleOf: (datasetId) => rules.get(datasetId),
    async start(timeoutMs) {
      await refresh(timeoutMs);
      schedule();
    },
    refresh: () => refresh(),
    async close() {
      stopped = true;
      clearTimeout(timer);
      await chain;
    },
  };
}
