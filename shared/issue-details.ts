import type * as v from 'valibot';
import type { ErrorDetail } from './errors.js';

/*
 * valibot issues as the `details` of a 400 `validation_failed`: `{path, message}` pairs with
 * readable paths and messages.
 */

const IDENT_RE = /^[A-Za-z_][A-Za-z0-9_-]*$/;

/** `record.field_to_value["a.b"][0]`: dotted where the key allows, JSON-quoted otherwise. */
export function formatPath(path: readonly v.IssuePathItem[] | undefined): string {
  if (path === undefined || path.length === 0) return 'body';
  let out = '';
  for (const item of path) {
    const key = item.key;
    if (typeof key === 'number') out += `[${key}]`;
    else if (typeof key === 'string' && IDENT_RE.test(key)) out += out === '' ? key : `.${key}`;
    else out += `[${JSON.stringify(String(key))}]`;
  }
  return out;
}

function issueMessage(issue: v.BaseIssue<unknown>): string {
  if ((issue.type === 'strict_object' || issue.type === 'never') && issue.expected === 'never') return 'is not a known property';
  if (issue.received === 'undefined' && issue.kind === 'schema') return 'is required';
  return issue.message;
}

/** Every problem valibot found, as `{path, message}` pairs. */
export function toDetails(issues: readonly v.BaseIssue<unknown>[]): ErrorDetail[] {
  return issues.map((issue) => ({ path: formatPath(issue.path), message: issueMessage(issue) }));
}
