import type { CompletionRules } from '../../worker/completion-rules.js';
import type { CompletionRule } from '../../shared/dataset-definition.js';

/** Completion rules fixed by the test (`ruleOf` of a dataset id), not read from the store. */
export function fixedRules(ruleOf: (datasetId: string) => CompletionRule | undefined): CompletionRules {
  return {
    rulesOf: (ids) => Promise.resolve(new Map(ids.flatMap((id) => {
      const rule = ruleOf(id);
      return rule === undefined ? [] : [[id, rule] as const];
    }))),
  };
}
