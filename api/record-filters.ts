import { createHash } from 'node:crypto';
import type { Filter } from 'mongodb';
import * as v from 'valibot';
import type { RecordDoc, ResponseDoc } from '../shared/documents.js';
import { keyNameProblem, ResponseStatus } from '../shared/schemas.js';

/**
 * The filters of `GET /datasets/{id}/records` and of the export (issue 25 §4). Record-level ones
 * (`status`, `metadata.<key>`) go into the records query, where an index serves the dataset, the
 * status and the order; response-level ones (`user_id`, `response_status`) are checked on each
 * record's responses, fetched by the unique (record, user_id) index.
 */

/** Statuses a record can have: `submitted` without a completion rule; `pending`/`completed` with one. */
export const RECORD_STATUSES = ['submitted', 'pending', 'completed'] as const;
export type RecordStatus = (typeof RECORD_STATUSES)[number];

/** Most `metadata.<key>` filters in one query (each is one more condition on every record scanned). */
export const MAX_METADATA_FILTERS = 10;
/** Longest `metadata.<key>` value, in characters. */
export const MAX_METADATA_VALUE_CHARS = 1024;
const FORBIDDEN_KEYS: ReadonlySet<string> = new Set(['__proto__', 'constructor', 'prototype']);
/** The query-string prefix of a metadata filter. */
export const METADATA_PARAM_PREFIX = 'metadata.';

/** The filter parameters that are plain names (the `metadata.<key>` ones are parsed by {@link MetadataFilters}). */
export const FILTER_ENTRIES = {
  status: v.exactOptional(
    v.pipe(
      v.picklist(RECORD_STATUSES, `must be one of ${RECORD_STATUSES.join(', ')}`),
      v.description('Only records with this `status` (`submitted` on datasets without a completion rule; `pending` or `completed` on datasets with one).'),
    ),
  ),
  user_id: v.exactOptional(
    v.pipe(
      v.string('must be a user_id'),
      v.minLength(1, 'must be a user_id of 1-256 characters'),
      v.maxLength(256, 'must be a user_id of 1-256 characters'),
      v.description('Only records with a response by this annotator (with `response_status`: whose response by this annotator has that status).'),
    ),
  ),
  response_status: v.exactOptional(
    v.pipe(
      ResponseStatus,
      v.description('Only records with a response of this status (draft, submitted, discarded); with `user_id`, that annotator\'s response.'),
    ),
  ),
} as const;

/** JSON's number syntax: `3`, `-0.5`, `1e3`; not `03`, `+3`, `.5`, `0x1f`. */
const JSON_NUMBER_RE = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/;

/**
 * The stored values a `metadata.<key>=<text>` filter matches: the string itself always; also the
 * boolean for `true`/`false` and the number for text in JSON's number syntax (finite), because a
 * query string cannot say which type was meant and metadata of either type is common.
 */
export function metadataMatches(text: string): readonly (string | number | boolean)[] {
  if (text === 'true') return [text, true];
  if (text === 'false') return [text, false];
  if (JSON_NUMBER_RE.test(text)) {
    const n = Number(text);
    if (Number.isFinite(n)) return [text, n];
  }
  return [text];
}

/** `metadata.<key>` parameters, keyed by `<key>` (path `query.metadata.<key>` in a 400). */
export const MetadataFilters = v.pipe(
  v.unknown(),
  // v.record skips these keys silently; a filter that is dropped would widen the answer.
  v.check((input) => typeof input !== 'object' || input === null || !Object.keys(input).some((k) => FORBIDDEN_KEYS.has(k)), 'metadata.<key>: key must not be __proto__, constructor or prototype'),
  v.record(
    v.pipe(
      v.string(),
      v.check((key) => keyNameProblem(key) === undefined, (issue) => `metadata.<key>: ${keyNameProblem(issue.input as string) ?? 'bad key'} (only top-level metadata keys can be filtered)`),
    ),
    v.pipe(
      v.string('must be given once (a repeated metadata filter is refused)'),
      v.maxLength(MAX_METADATA_VALUE_CHARS, `must be at most ${MAX_METADATA_VALUE_CHARS} characters`),
      v.description('`metadata.<key>=<value>`: records whose `metadata[<key>]` equals the value, as a string, or as a boolean for `true`/`false`, or as a number for JSON number syntax (`metadata.turn=3` matches 3 and "3").'),
    ),
    'give metadata filters as metadata.<key>=<value> (a parameter named metadata alone is not one)',
  ),
  v.check((m) => Object.keys(m).length <= MAX_METADATA_FILTERS, `at most ${MAX_METADATA_FILTERS} metadata.<key> filters`),
);

/** The filters of one read, validated. Absent = no condition. */
export interface RecordFilters {
  readonly status?: RecordStatus | undefined;
  readonly userId?: string | undefined;
  readonly responseStatus?: ResponseStatus | undefined;
  /** `<key>` → the value as given in the query string. */
  readonly metadata: Readonly<Record<string, string>>;
}

export const NO_FILTERS: RecordFilters = { metadata: {} };

/**
 * Splits a query string into its `metadata.<key>` parameters (keyed by `<key>`) and the rest, so
 * that the rest is parsed by a strict schema (an unknown name is a 400) and the metadata ones by
 * {@link MetadataFilters}. A parameter named `metadata` alone stays in the rest (and is refused).
 */
export function splitMetadataParams<T>(query: Readonly<Record<string, T>>): { readonly metadata: Record<string, T>; readonly rest: Record<string, T> } {
  const metadata: Record<string, T> = {};
  const rest: Record<string, T> = {};
  // Defined, not assigned: `metadata.__proto__=1` must arrive as a key (and be refused), not set a prototype.
  const put = (target: Record<string, T>, key: string, value: T) => Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
  for (const [name, value] of Object.entries(query)) {
    if (name.startsWith(METADATA_PARAM_PREFIX)) put(metadata, name.slice(METADATA_PARAM_PREFIX.length), value);
    else put(rest, name, value);
  }
  return { metadata, rest };
}

export function hasResponseFilter(filters: RecordFilters): boolean {
  return filters.userId !== undefined || filters.responseStatus !== undefined;
}

function isEmpty(filters: RecordFilters): boolean {
  return filters.status === undefined && !hasResponseFilter(filters) && Object.keys(filters.metadata).length === 0;
}

/**
 * A short digest of the filters, carried by a page's cursor so that the next page is refused
 * (400) with other filters; null without filters, which is what cursors made before filters say.
 */
export function filterDigest(filters: RecordFilters): string | null {
  if (isEmpty(filters)) return null;
  const canonical = JSON.stringify([filters.status ?? null, filters.userId ?? null, filters.responseStatus ?? null, Object.entries(filters.metadata).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))]);
  return createHash('sha256').update(canonical).digest('base64url').slice(0, 16);
}

/** The conditions the filters put on record documents (status, metadata); the dataset is the caller's. */
export function recordConditions(filters: RecordFilters): Filter<RecordDoc>[] {
  const out: Filter<RecordDoc>[] = [];
  // RecordDoc types today's single status; the filter also names those of a completion rule.
  if (filters.status !== undefined) out.push({ status: filters.status } as Filter<RecordDoc>);
  for (const [key, text] of Object.entries(filters.metadata)) {
    const matches = metadataMatches(text);
    out.push({ [`metadata.${key}`]: matches.length === 1 ? matches[0] : { $in: [...matches] } } as Filter<RecordDoc>);
  }
  return out;
}

/** Whether one of a record's responses passes the response-level filters (always true without them). */
export function responsesMatch(filters: RecordFilters, responses: readonly ResponseDoc[] | undefined): boolean {
  if (!hasResponseFilter(filters)) return true;
  return (responses ?? []).some((r) => (filters.userId === undefined || r.user_id === filters.userId) && (filters.responseStatus === undefined || r.status === filters.responseStatus));
}
