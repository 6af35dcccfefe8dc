import * as v from 'valibot';
import { decodeCursorText, encodeCursorText } from '../shared/cursor-text.js';
import { AGREEMENT_LEVELS } from '../shared/agreement.js';
import { DatasetId, keyNameProblem, queryLimit } from '../shared/schemas.js';
import { FILTER_ENTRIES, filterDigest, MetadataFilters, METADATA_PARAM_PREFIX, splitMetadataParams, type RecordFilters } from './record-filters.js';

/** Most records one page of `GET /datasets/{id}/records` returns; the default is {@link DEFAULT_PAGE_LIMIT}. */
export const MAX_PAGE_LIMIT = 500;
export const DEFAULT_PAGE_LIMIT = 50;

/** The query string of a read that takes no parameter: any one is 400, as on the other reads. */
export const NoParameters = v.strictObject({});

export const RECORD_ORDERS = ['newest', 'oldest'] as const;
export type RecordOrder = (typeof RECORD_ORDERS)[number];

/** ISO 8601 date-time with an explicit offset (`Z` or `±hh:mm`): a time without one is ambiguous. */
const ISO_TIME_RE = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(\.\d{1,9})?)?(?:Z|[+-](\d{2}):(\d{2}))$/;

/**
 * Ms since the epoch of an ISO 8601 time with an offset, or undefined when it is not one or
 * names a time that does not exist (2026-02-30, 24:00, a 60th second, an offset of 24 h):
 * Date.parse rolls such dates over instead of refusing them.
 */
export function parseIsoTime(text: string): number | undefined {
  const m = ISO_TIME_RE.exec(text);
  if (m === null) return undefined;
  const [year, month, day, hour, minute, second, offsetHours, offsetMinutes] = [1, 2, 3, 4, 5, 6, 8, 9].map((i) => Number(m[i] ?? 0)) as [number, number, number, number, number, number, number, number];
  if (month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || second > 59 || offsetHours > 23 || offsetMinutes > 59) return undefined;
  const daysInMonth = new Date(Date.UTC(year, month, 0)).getUTCDate();
  if (day > daysInMonth) return undefined;
  const ms = Date.parse(text);
  return Number.isSafeInteger(ms) ? ms : undefined;
}

/** The path parameter `{dataset_id}`: the same rule as `record.feedback_dataset_id` of a write. */
export const DatasetIdParam = DatasetId;

/** Where a page ends, and the query it belongs to: the next page repeats the same query. */
export interface PageCursor {
  readonly order: RecordOrder;
  /** `created_at` of the last record of the page, ms since the epoch. */
  readonly createdAtMs: number;
  /** `_id` of the last record of the page (ties on `created_at` are broken by `_id`). */
  readonly id: string;
  /** `updated_since` of the query, ms since the epoch; null without one. */
  readonly updatedSinceMs: number | null;
  /** The dataset the page belongs to (undefined in cursors of version 1, which did not say). */
  readonly datasetId?: string | undefined;
  /** {@link filterDigest} of the query's filters; null without filters (and in cursors of versions 1 and 2). */
  readonly filterDigest?: string | null | undefined;
}

/**
 * Version 2 names the dataset: a cursor of one dataset is refused on another. Version 3 adds the
 * digest of the filters, so that a cursor is refused with other filters. Versions 1 and 2 are
 * still read (as unfiltered).
 */
const CURSOR_VERSION = 3;

/**
 * Opaque to clients (base64url of a small JSON array), not signed: a tampered cursor only moves
 * the position inside a dataset the key may read anyway.
 */
export function encodeCursor(cursor: PageCursor): string {
  return encodeCursorText([CURSOR_VERSION, cursor.order === 'newest' ? 'n' : 'o', cursor.createdAtMs, cursor.id, cursor.updatedSinceMs, cursor.datasetId, cursor.filterDigest ?? null]);
}

export function decodeCursor(text: string): PageCursor | undefined {
  const parsed = decodeCursorText(text);
  if (parsed === undefined) return undefined;
  const [version, order, createdAtMs, id, updatedSinceMs, datasetId, digest] = parsed as unknown[];
  const named = typeof datasetId === 'string';
  if (!((version === 1 && parsed.length === 5) || (version === 2 && parsed.length === 6 && named) || (version === CURSOR_VERSION && parsed.length === 7 && named && (digest === null || typeof digest === 'string')))) return undefined;
  if (order !== 'n' && order !== 'o') return undefined;
  if (typeof createdAtMs !== 'number' || !Number.isSafeInteger(createdAtMs)) return undefined;
  if (typeof id !== 'string' || id.length === 0 || id.length > 200) return undefined;
  if (updatedSinceMs !== null && (typeof updatedSinceMs !== 'number' || !Number.isSafeInteger(updatedSinceMs))) return undefined;
  return { order: order === 'n' ? 'newest' : 'oldest', createdAtMs, id, updatedSinceMs, datasetId: named ? datasetId : undefined, filterDigest: typeof digest === 'string' ? digest : null };
}

/**
 * The query string of `GET /datasets/{dataset_id}/records`, as strings. `order` (newest | oldest,
 * default newest), `limit` (1-500, default 50), `updated_since` (ISO 8601 with offset),
 * `responses` (true | false, default true), `cursor` (the `next_cursor` of the previous page,
 * which carries `order` and `updated_since`: repeating them is allowed, changing them is not),
 * and the filters of api/record-filters.ts (not carried: repeated with every page, other filters
 * with a cursor are refused).
 */
const RECORD_LIST_ENTRIES = {
  order: v.exactOptional(v.pipe(v.picklist(RECORD_ORDERS, 'must be one of newest, oldest'), v.metadata({ default: 'newest' }))),
  limit: queryLimit(MAX_PAGE_LIMIT, DEFAULT_PAGE_LIMIT),
  updated_since: v.exactOptional(
    v.pipe(
      v.string('must be an ISO 8601 time'),
      v.regex(ISO_TIME_RE, 'must be an ISO 8601 time with an offset, e.g. 2026-11-23T21:00:00Z'),
      v.description('ISO 8601 date-time with an offset (`Z` or `±hh:mm`) that exists (no 2026-02-30, no 24:00).'),
      v.transform(parseIsoTime),
      v.check((ms) => ms !== undefined, 'must be a time that exists (a valid day of the month, hours 00-23, minutes and seconds 00-59)'),
      v.transform((ms) => ms!),
    ),
  ),
  responses: v.exactOptional(
    v.pipe(v.picklist(['true', 'false'], 'must be true or false'), v.description("Include each record's responses."), v.metadata({ default: 'true' }), v.transform((s) => s === 'true')),
  ),
  cursor: v.exactOptional(
    v.pipe(
      v.string('must be a cursor this service returned'),
      v.description('The `next_cursor` of the previous page; it carries `order` and `updated_since` (changing them is 400). Filters are not carried: repeat them (other filters are 400).'),
      v.transform((s) => decodeCursor(s)),
      v.check((c) => c !== undefined, 'is not a cursor this service returned'),
    ),
  ),
  ...FILTER_ENTRIES,
};

/** `metadata.<key>` filters, grouped under `metadata` by {@link groupMetadataParams}. */
const METADATA_ENTRY = { metadata: v.exactOptional(MetadataFilters) };

/**
 * The query string with its `metadata.<key>` parameters grouped into one `metadata` object, as
 * {@link RecordListQuery} and {@link ExportQuery} take it (a 400 then names `query.metadata.<key>`).
 */
export function groupMetadataParams<T>(query: Readonly<Record<string, T>>): Record<string, T | Record<string, T>> {
  const { metadata, rest } = splitMetadataParams(query);
  return Object.keys(metadata).length === 0 ? rest : { ...rest, metadata };
}

/** The filters of a parsed query, in the shape the reader takes. */
export function toFilters(query: { status?: RecordFilters['status']; user_id?: string; response_status?: RecordFilters['responseStatus']; metadata?: Record<string, string> }): RecordFilters {
  return { status: query.status, userId: query.user_id, responseStatus: query.response_status, metadata: query.metadata ?? {} };
}

export const RecordListQuery = v.pipe(
  v.strictObject({ ...RECORD_LIST_ENTRIES, ...METADATA_ENTRY }),
  v.forward(
    v.check(
      (q) => q.cursor === undefined || ((q.order === undefined || q.order === q.cursor.order) && (q.updated_since === undefined || q.updated_since === q.cursor.updatedSinceMs)),
      'belongs to another order or updated_since than this query',
    ),
    ['cursor'],
  ),
  v.forward(
    v.check((q) => q.cursor === undefined || (q.cursor.filterDigest ?? null) === filterDigest(toFilters(q)), 'belongs to other filters than this query: repeat the filters of the first page with every cursor'),
    ['cursor'],
  ),
);

/** The query string of `GET /datasets/{dataset_id}/export`: the filters only (an unknown parameter is a 400, as on `/records`). */
export const ExportQuery = v.strictObject({ ...FILTER_ENTRIES, ...METADATA_ENTRY });

/**
 * The query parameters as OpenAPI lists them: the `metadata.<key>` filters stand as one
 * parameter `metadata.{key}` (any top-level metadata key in place of `{key}`).
 */
const METADATA_PARAM_DOC = { [`${METADATA_PARAM_PREFIX}{key}`]: v.exactOptional(v.pipe(v.string(), v.description('Any number (up to 10) of `metadata.<key>=<value>` parameters, `<key>` a top-level metadata key: records whose `metadata[<key>]` equals the value as a string, or also as a boolean for `true`/`false`, or also as a number for JSON number syntax (`metadata.turn=3` matches 3 and "3").'))) };
export const RECORD_LIST_QUERY_DOC = { entries: { ...RECORD_LIST_ENTRIES, ...METADATA_PARAM_DOC } };
export const EXPORT_QUERY_DOC = { entries: { ...FILTER_ENTRIES, ...METADATA_PARAM_DOC } };

/** A validated listing query: defaults applied, the cursor's order and `updated_since` taken over. */
export interface RecordListing {
  readonly order: RecordOrder;
  readonly limit: number;
  readonly updatedSinceMs: number | null;
  readonly includeResponses: boolean;
  readonly after: PageCursor | undefined;
  readonly filters: RecordFilters;
}

export function toListing(query: v.InferOutput<typeof RecordListQuery>): RecordListing {
  const after = query.cursor ?? undefined;
  return {
    order: after?.order ?? query.order ?? 'newest',
    limit: query.limit ?? DEFAULT_PAGE_LIMIT,
    updatedSinceMs: after?.updatedSinceMs ?? query.updated_since ?? null,
    includeResponses: query.responses ?? true,
    after,
    filters: toFilters(query),
  };
}

/** Most annotators one `annotators=` filter names. */
export const MAX_AGREEMENT_ANNOTATORS = 100;

/**
 * The query string of `GET /datasets/{dataset_id}/agreement`: `question` (required), `level`
 * (default by question type), `annotators` (comma-separated `user_id`s), `records` (`all` or
 * `completed`), `include_agents` (`true` or comma-separated agents).
 */
export const AgreementQuery = v.strictObject({
  question: v.pipe(
    v.string('is required: the name of the question to measure'),
    v.check((s) => keyNameProblem(s) === undefined, (issue) => `must be a question name (${keyNameProblem(issue.input as string) ?? ''})`),
    v.description('The question (`values` key) to measure.'),
  ),
  level: v.exactOptional(
    v.pipe(
      v.picklist(AGREEMENT_LEVELS, `must be one of ${AGREEMENT_LEVELS.join(', ')}`),
      v.description('Level of measurement; default by question type: label nominal, rating ordinal, number interval, multi_label nominal (per option); without a definition interval when every value is a number, else nominal.'),
    ),
  ),
  annotators: v.exactOptional(
    v.pipe(
      v.string('must be a comma-separated list of user_ids'),
      v.description(`Only these annotators (comma-separated \`user_id\`s, at most ${MAX_AGREEMENT_ANNOTATORS}; a user_id holding a comma cannot be named here).`),
      v.transform((s) => s.split(',')),
      v.check((list) => list.every((id) => id.length > 0 && id.length <= 256), 'must be user_ids of 1-256 characters, separated by single commas'),
      v.check((list) => list.length <= MAX_AGREEMENT_ANNOTATORS, `must name at most ${MAX_AGREEMENT_ANNOTATORS} annotators`),
      v.transform((list) => [...new Set(list)]),
    ),
  ),
  records: v.exactOptional(
    v.pipe(
      v.picklist(['all', 'completed'], 'must be all or completed'),
      v.description("`all` (default), or `completed`: only records whose `status` is `completed` (the dataset's completion rule); a dataset without a rule has none."),
      v.metadata({ default: 'all' }),
    ),
  ),
  include_agents: v.exactOptional(
    v.pipe(
      v.string('must be true or a comma-separated list of agents'),
      v.description(
        `Model suggestions as extra observers beside the annotators: \`true\` for every agent, or comma-separated agent names (at most ${MAX_AGREEMENT_ANNOTATORS}). ` +
          'Each agent is one observer; its current suggestion for the question is its value on the record. The answer then counts them in `agents`.',
      ),
      v.transform((s): 'all' | string[] => (s === 'true' ? 'all' : s.split(','))),
      v.check((list) => list === 'all' || list.every((name) => name.length > 0 && name.length <= 256), 'must be true or agent names of 1-256 characters, separated by single commas'),
      v.check((list) => list === 'all' || list.length <= MAX_AGREEMENT_ANNOTATORS, `must name at most ${MAX_AGREEMENT_ANNOTATORS} agents`),
      v.transform((list) => (list === 'all' ? list : [...new Set(list)])),
    ),
  ),
});
