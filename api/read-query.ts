import * as v from 'valibot';
import { DatasetId, queryLimit } from '../shared/schemas.js';

/** Most records one page of `GET /datasets/{id}/records` returns; the default is {@link DEFAULT_PAGE_LIMIT}. */
export const MAX_PAGE_LIMIT = 500;
export const DEFAULT_PAGE_LIMIT = 50;

export const RECORD_ORDERS = ['newest', 'oldest'] as const;
export type RecordOrder = (typeof RECORD_ORDERS)[number];

/** ISO 8601 date-time with an explicit offset (`Z` or `±hh:mm`): a time without one is ambiguous. */
const ISO_TIME_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/;

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
}

const CURSOR_VERSION = 1;

/**
 * Opaque to clients (base64url of a small JSON array), not signed: a tampered cursor only moves
 * the position inside a dataset the key may read anyway.
 */
export function encodeCursor(cursor: PageCursor): string {
  const json = JSON.stringify([CURSOR_VERSION, cursor.order === 'newest' ? 'n' : 'o', cursor.createdAtMs, cursor.id, cursor.updatedSinceMs]);
  return Buffer.from(json, 'utf8').toString('base64url');
}

export function decodeCursor(text: string): PageCursor | undefined {
  if (!/^[A-Za-z0-9_-]{1,2048}$/.test(text)) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'));
  } catch {
    return undefined;
  }
  if (!Array.isArray(parsed) || parsed.length !== 5) return undefined;
  const [version, order, createdAtMs, id, updatedSinceMs] = parsed as unknown[];
  if (version !== CURSOR_VERSION || (order !== 'n' && order !== 'o')) return undefined;
  if (typeof createdAtMs !== 'number' || !Number.isSafeInteger(createdAtMs)) return undefined;
  if (typeof id !== 'string' || id.length === 0 || id.length > 200) return undefined;
  if (updatedSinceMs !== null && (typeof updatedSinceMs !== 'number' || !Number.isSafeInteger(updatedSinceMs))) return undefined;
  return { order: order === 'n' ? 'newest' : 'oldest', createdAtMs, id, updatedSinceMs };
}

/**
 * The query string of `GET /datasets/{dataset_id}/records`, as strings. `order` (newest | oldest,
 * default newest), `limit` (1-500, default 50), `updated_since` (ISO 8601 with offset),
 * `responses` (true | false, default true), `cursor` (the `next_cursor` of the previous page,
 * which carries `order` and `updated_since`: repeating them is allowed, changing them is not).
 */
export const RecordListQuery = v.pipe(
  v.strictObject({
    order: v.exactOptional(v.pipe(v.picklist(RECORD_ORDERS, 'must be one of newest, oldest'), v.metadata({ default: 'newest' }))),
    limit: queryLimit(MAX_PAGE_LIMIT, DEFAULT_PAGE_LIMIT),
    updated_since: v.exactOptional(
      v.pipe(
        v.string('must be an ISO 8601 time'),
        v.regex(ISO_TIME_RE, 'must be an ISO 8601 time with an offset, e.g. 2026-11-23T21:00:00Z'),
        v.description('ISO 8601 date-time with an offset (`Z` or `±hh:mm`).'),
        v.transform((s) => Date.parse(s)),
        v.check((ms) => Number.isSafeInteger(ms), 'must be a valid ISO 8601 time'),
      ),
    ),
    responses: v.exactOptional(
      v.pipe(v.picklist(['true', 'false'], 'must be true or false'), v.description("Include each record's responses."), v.metadata({ default: 'true' }), v.transform((s) => s === 'true')),
    ),
    cursor: v.exactOptional(
      v.pipe(
        v.string('must be a cursor this service returned'),
        v.description('The `next_cursor` of the previous page; it carries `order` and `updated_since` (changing them is 400).'),
        v.transform((s) => decodeCursor(s)),
        v.check((c) => c !== undefined, 'is not a cursor this service returned'),
      ),
    ),
  }),
  v.forward(
    v.check(
      (q) => q.cursor === undefined || ((q.order === undefined || q.order === q.cursor.order) && (q.updated_since === undefined || q.updated_since === q.cursor.updatedSinceMs)),
      'belongs to another order or updated_since than this query',
    ),
    ['cursor'],
  ),
);

/** A validated listing query: defaults applied, the cursor's order and `updated_since` taken over. */
export interface RecordListing {
  readonly order: RecordOrder;
  readonly limit: number;
  readonly updatedSinceMs: number | null;
  readonly includeResponses: boolean;
  readonly after: PageCursor | undefined;
}

export function toListing(query: v.InferOutput<typeof RecordListQuery>): RecordListing {
  const after = query.cursor ?? undefined;
  return {
    order: after?.order ?? query.order ?? 'newest',
    limit: query.limit ?? DEFAULT_PAGE_LIMIT,
    updatedSinceMs: after?.updatedSinceMs ?? query.updated_since ?? null,
    includeResponses: query.responses ?? true,
    after,
  };
}
