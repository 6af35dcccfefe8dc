import type { Collection, Db } from 'mongodb';
import * as v from 'valibot';
import { DatasetDefinition, DatasetDefinitionInput } from './dataset-definition.js';
import type { ErrorDetail } from './errors.js';
import { COLLECTIONS } from './mongo.js';
import { DatasetId, queryLimit } from './schemas.js';
import { toDetails } from './issue-details.js';
import { decodeCursorText, encodeCursorText } from './cursor-text.js';

/** A definition as stored in `feedback_datasets`: `_id` is the dataset id. */
interface DatasetDoc extends Omit<DatasetDefinition, 'id' | 'created_at' | 'updated_at'> {
  readonly _id: string;
  readonly created_at: Date;
  readonly updated_at: Date;
}

/** A definition that does not follow the rules; `details` lists each problem with its path. */
export class DatasetDefinitionError extends Error {
  readonly details: readonly ErrorDetail[];
  constructor(details: readonly ErrorDetail[]) {
    super(`${details[0]?.path ?? 'body'} ${details[0]?.message ?? 'is not a valid dataset definition'}`);
    this.name = 'DatasetDefinitionError';
    this.details = details;
  }
}

export const DATASET_LIST_MAX = 500;
const DATASET_LIST_DEFAULT = 100;

/** A page of `GET /datasets` ends after this id; the cursor is opaque (base64url of `["d", id]`). */
function encodeDatasetCursor(lastId: string): string {
  return encodeCursorText(['d', lastId]);
}

function decodeDatasetCursor(text: string): string | undefined {
  const parts = decodeCursorText(text);
  if (parts === undefined || parts.length !== 2 || parts[0] !== 'd') return undefined;
  return v.is(DatasetId, parts[1]) ? parts[1] : undefined;
}

/** Query of `GET /datasets`: `limit` (1–500, default 100), `cursor` (the `next_cursor` of the previous page). */
export const DatasetListQuery = v.strictObject({
  limit: queryLimit(DATASET_LIST_MAX, DATASET_LIST_DEFAULT),
  cursor: v.exactOptional(
    v.pipe(
      v.string('must be a cursor this service returned'),
      v.description('The `next_cursor` of the previous page.'),
      v.transform(decodeDatasetCursor),
      v.check((id) => id !== undefined, 'is not a cursor this service returned'),
    ),
  ),
});
export type DatasetListQuery = v.InferOutput<typeof DatasetListQuery>;

export const DatasetPage = v.object({
  items: v.array(DatasetDefinition),
  next_cursor: v.pipe(v.nullable(v.string()), v.description('Pass as `cursor` for the next page; null on the last page.')),
});
export type DatasetPage = v.InferOutput<typeof DatasetPage>;

export interface DatasetAdmin {
  /**
   * Creates or replaces the definition of `id`. Idempotent: the same definition again changes
   * nothing (not even `updated_at`). Throws {@link DatasetDefinitionError} for a bad definition.
   */
  put(id: string, input: unknown): Promise<{ readonly definition: DatasetDefinition; readonly created: boolean }>;
  get(id: string): Promise<DatasetDefinition | undefined>;
  /** Ordered by id. */
  list(query?: DatasetListQuery): Promise<DatasetPage>;
  /** Every stored definition that follows the rules; `invalid` counts the others (skipped). */
  all(options?: { timeoutMs?: number }): Promise<{ readonly definitions: DatasetDefinition[]; readonly invalid: string[] }>;
}

function toDefinition(doc: DatasetDoc): DatasetDefinition {
  return {
    id: doc._id,
    ...(doc.title === undefined ? {} : { title: doc.title }),
    ...(doc.description === undefined ? {} : { description: doc.description }),
    fields: doc.fields,
    questions: doc.questions,
    ...(doc.completion === undefined ? {} : { completion: doc.completion }),
    created_at: doc.created_at.toISOString(),
    updated_at: doc.updated_at.toISOString(),
  };
}

/** The definition part of a document, parsed again: a document edited by hand may break the rules. */
function parseStored(doc: DatasetDoc): DatasetDefinition | undefined {
  const parsed = v.safeParse(DatasetDefinitionInput, definitionPart(doc));
  if (!parsed.success || !(doc.created_at instanceof Date) || !(doc.updated_at instanceof Date) || typeof doc._id !== 'string') return undefined;
  return toDefinition({ _id: doc._id, created_at: doc.created_at, updated_at: doc.updated_at, ...parsed.output });
}

/** What an admin defines: the document without its id and times. */
function definitionPart(doc: DatasetDoc): Omit<DatasetDoc, '_id' | 'created_at' | 'updated_at'> {
  return Object.fromEntries(Object.entries(doc).filter(([k]) => k !== '_id' && k !== 'created_at' && k !== 'updated_at')) as Omit<DatasetDoc, '_id' | 'created_at' | 'updated_at'>;
}

/** Key order does not matter to a definition's meaning: compare by a canonical JSON text. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    return `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/** Stores and reads dataset definitions (`feedback_datasets`); behind the admin endpoints and the CLI. */
export function createDatasetAdmin(options: { db: Db }): DatasetAdmin {
  const col: Collection<DatasetDoc> = options.db.collection<DatasetDoc>(COLLECTIONS.datasets);
  return {
    async put(id, input) {
      const idCheck = v.safeParse(DatasetId, id);
      if (!idCheck.success) throw new DatasetDefinitionError(toDetails(idCheck.issues).map((d) => ({ path: 'id', message: d.message })));
      const parsed = v.safeParse(DatasetDefinitionInput, input, { abortEarly: false });
      if (!parsed.success) throw new DatasetDefinitionError(toDetails(parsed.issues));
      const { id: bodyId, ...definition } = parsed.output;
      if (bodyId !== undefined && bodyId !== id) throw new DatasetDefinitionError([{ path: 'id', message: `must be the dataset id of the path (${JSON.stringify(id)}) or be left out` }]);
      const existing = await col.findOne({ _id: id });
      if (existing !== null && canonical(definitionPart(existing)) === canonical(definition)) return { definition: toDefinition(existing), created: false };
      const now = new Date();
      const doc: DatasetDoc = { _id: id, ...definition, created_at: existing?.created_at ?? now, updated_at: now };
      await col.replaceOne({ _id: id }, doc, { upsert: true });
      return { definition: toDefinition(doc), created: existing === null };
    },
    async get(id) {
      // An id that breaks the rule was never stored (put refuses it); the store is not asked.
      if (!v.is(DatasetId, id)) return undefined;
      const doc = await col.findOne({ _id: id });
      return doc === null ? undefined : parseStored(doc) ?? toDefinition(doc);
    },
    async list(query = {}) {
      const limit = query.limit ?? DATASET_LIST_DEFAULT;
      const filter = query.cursor === undefined ? {} : { _id: { $gt: query.cursor } };
      const docs = await col.find(filter).sort({ _id: 1 }).limit(limit + 1).toArray();
      const page = docs.slice(0, limit);
      return { items: page.map(toDefinition), next_cursor: docs.length > limit ? encodeDatasetCursor(page[page.length - 1]!._id) : null };
    },
    async all(allOptions = {}) {
      const docs = await col.find({}, allOptions.timeoutMs === undefined ? {} : { timeoutMS: allOptions.timeoutMs }).toArray();
      const definitions: DatasetDefinition[] = [];
      const invalid: string[] = [];
      for (const doc of docs) {
        const definition = parseStored(doc);
        if (definition === undefined) invalid.push(String(doc._id));
        else definitions.push(definition);
      }
      return { definitions, invalid };
    },
  };
}
