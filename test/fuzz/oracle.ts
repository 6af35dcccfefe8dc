/**
 * An independent reading of the contract (SPEC.md and the body rules of docs/api.md), written without
 * looking at shared/schemas.ts, so that a generated body can be judged valid or not by something
 * other than the code under test. Where the contract names no limit docs/api.md does:
 * `external_id` 1–1024, `user_id` 1–256, `feedback_record_id` 1–200 characters.
 *
 * On top of the written rules, the oracle holds that a 200 means "stored as sent": a body the
 * store cannot keep unchanged is not valid input. That covers strings that are not well-formed
 * Unicode (a lone surrogate becomes U+FFFD on the way to BSON) and numbers outside the double range
 * (1e400 parses to Infinity, which JSON carries into the queue as null).
 */

const MAX_DEPTH = 32;
const FORBIDDEN_KEYS = new Set(['__proto__', 'constructor', 'prototype']);
export const STATUSES = ['draft', 'submitted', 'discarded'] as const;

export function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Code units, as JavaScript counts string length. */
function len(s: string): number {
  return s.length;
}

export function keyIsValid(k: string): boolean {
  return len(k) >= 1 && len(k) <= 200 && !k.startsWith('$') && !k.includes('.') && !k.includes('\0') && !FORBIDDEN_KEYS.has(k);
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Well-formed UTF-16 (no lone surrogate): what UTF-8, hence BSON, can carry unchanged. */
function stringIsStorable(s: string): boolean {
  return !LONE_SURROGATE.test(s);
}

/** Container depth of a JSON value: the body object is level 1, each nested object or array adds 1. */
function depth(v: unknown): number {
  let max = 0;
  const stack: [unknown, number][] = [[v, 1]];
  while (stack.length > 0) {
    const [value, d] = stack.pop()!;
    if (typeof value !== 'object' || value === null) continue;
    if (d > max) max = d;
    for (const child of Array.isArray(value) ? value : Object.values(value)) stack.push([child, d + 1]);
  }
  return max;
}

/** Problems of a free-form JSON object (field_to_value, values, metadata): key names, storable leaves. */
function freeFormProblems(v: unknown, path: string, out: string[]): void {
  const stack: [unknown, string][] = [[v, path]];
  while (stack.length > 0) {
    const [value, p] = stack.pop()!;
    if (typeof value === 'string') {
      if (!stringIsStorable(value)) out.push(`${p}: string is not well-formed Unicode`);
    } else if (typeof value === 'number') {
      if (!Number.isFinite(value)) out.push(`${p}: number out of range`);
    } else if (Array.isArray(value)) {
      value.forEach((item, i) => stack.push([item, `${p}[${i}]`]));
    } else if (isPlainObject(value)) {
      for (const [k, item] of Object.entries(value)) {
        if (!keyIsValid(k)) out.push(`${p}: bad key ${JSON.stringify(k)}`);
        if (!stringIsStorable(k)) out.push(`${p}: key is not well-formed Unicode`);
        stack.push([item, `${p}.${k}`]);
      }
    }
  }
}

function stringField(v: unknown, min: number, max: number, path: string, out: string[]): void {
  if (typeof v !== 'string') out.push(`${path}: not a string`);
  else if (len(v) < min || len(v) > max) out.push(`${path}: length ${len(v)} outside ${min}-${max}`);
  else if (!stringIsStorable(v)) out.push(`${path}: not well-formed Unicode`);
}

/** The dataset id rule, written independently of shared/schemas.ts: also no control characters, no leading $, not a prototype name. */
function datasetIdField(v: unknown, path: string, out: string[]): void {
  stringField(v, 1, 256, path, out);
  if (typeof v !== 'string') return;
  if ([...v].some((c) => c.charCodeAt(0) <= 0x1f || (c.charCodeAt(0) >= 0x7f && c.charCodeAt(0) <= 0x9f))) out.push(`${path}: control character`);
  if (v.startsWith('$')) out.push(`${path}: starts with $`);
  if (['__proto__', 'constructor', 'prototype'].includes(v)) out.push(`${path}: prototype name`);
}

function onlyKeys(o: Record<string, unknown>, allowed: readonly string[], path: string, out: string[]): void {
  for (const k of Object.keys(o)) if (!allowed.includes(k)) out.push(`${path}: unknown property ${JSON.stringify(k)}`);
}

function responseProblems(r: unknown, statusRequired: boolean, out: string[]): void {
  if (!isPlainObject(r)) {
    out.push('response: not an object');
    return;
  }
  onlyKeys(r, ['values', 'status', 'user_id'], 'response', out);
  const status = r['status'];
  if (status === undefined ? statusRequired : !STATUSES.includes(status as (typeof STATUSES)[number])) out.push('response.status: missing or not a status');
  const values = r['values'];
  if (!isPlainObject(values)) out.push('response.values: not an object');
  else {
    const effective = status ?? 'submitted';
    if (Object.keys(values).length === 0 && effective !== 'discarded') out.push('response.values: empty');
    freeFormProblems(values, 'response.values', out);
  }
  if ('user_id' in r) stringField(r['user_id'], 1, 256, 'response.user_id', out);
}

/** Why a POST /feedback-record body is invalid; empty when it is valid. */
export function recordBodyProblems(body: unknown): string[] {
  const out: string[] = [];
  if (!isPlainObject(body)) return ['body: not an object'];
  onlyKeys(body, ['record', 'response'], 'body', out);
  const rec = body['record'];
  if (!isPlainObject(rec)) out.push('record: not an object');
  else {
    onlyKeys(rec, ['feedback_dataset_id', 'field_to_value', 'external_id', 'metadata'], 'record', out);
    datasetIdField(rec['feedback_dataset_id'], 'record.feedback_dataset_id', out);
    const ftv = rec['field_to_value'];
    if (!isPlainObject(ftv) || Object.keys(ftv).length === 0) out.push('record.field_to_value: not a non-empty object');
    else freeFormProblems(ftv, 'record.field_to_value', out);
    if ('external_id' in rec) stringField(rec['external_id'], 1, 1024, 'record.external_id', out);
    if ('metadata' in rec) {
      if (!isPlainObject(rec['metadata'])) out.push('record.metadata: not an object');
      else freeFormProblems(rec['metadata'], 'record.metadata', out);
    }
  }
  responseProblems(body['response'], false, out);
  if (depth(body) > MAX_DEPTH) out.push('body: too deep');
  return out;
}

/** Why a POST /feedback-response body is invalid; empty when it is valid (the record may still be unknown). */
export function responseBodyProblems(body: unknown): string[] {
  const out: string[] = [];
  if (!isPlainObject(body)) return ['body: not an object'];
  onlyKeys(body, ['feedback_record_id', 'response'], 'body', out);
  stringField(body['feedback_record_id'], 1, 200, 'feedback_record_id', out);
  responseProblems(body['response'], true, out);
  if (depth(body) > MAX_DEPTH) out.push('body: too deep');
  return out;
}
