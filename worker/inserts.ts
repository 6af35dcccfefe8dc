import type { Collection, OptionalUnlessRequiredId } from 'mongodb';
import { operationsAborted, outcomesOfBulkError } from './bulk-errors.js';
import { splitOversize } from './document-size.js';
import { isDuplicateKey, isTransientMongoError, TransientStoreError } from './errors.js';
import { inChunks, STORE_CHUNK_DOCS } from './store-chunks.js';

/** What became of one document: newly inserted, already there (same _id), or refused for good. */
export type InsertOutcome = { readonly kind: 'inserted' } | { readonly kind: 'present' } | { readonly kind: 'rejected'; readonly error: string };

const INSERTED: InsertOutcome = { kind: 'inserted' };
const PRESENT: InsertOutcome = { kind: 'present' };

/**
 * Inserts documents whose _id was minted by the API, so a duplicate key means "stored before"
 * (a job run twice). Unordered insertMany commands of at most STORE_CHUNK_DOCS, sent at once, whose per-document errors say which documents
 * failed (MongoDB and FerretDB alike); any other error is resolved one document at a time
 * (repeating an insert that did apply only meets its own duplicate). Throws
 * {@link TransientStoreError} when the store cannot be reached.
 */
export async function insertNew<D extends { _id: string }>(col: Collection<D>, docs: readonly D[]): Promise<InsertOutcome[]> {
  if (docs.length === 0) return [];
  return inChunks(docs, STORE_CHUNK_DOCS, (slice) => insertSlice(col, slice));
}

async function insertSlice<D extends { _id: string }>(col: Collection<D>, docs: readonly D[]): Promise<InsertOutcome[]> {
  try {
    await col.insertMany(docs as OptionalUnlessRequiredId<D>[], { ordered: false });
    return docs.map(() => INSERTED);
  } catch (err) {
    // A document over the limit is refused alone, without a round trip; the others go on together.
    const split = await splitOversize<D, InsertOutcome>(err, docs, (doc) => doc, (fitting) => insertSlice(col, fitting), (error) => ({ kind: 'rejected', error }));
    if (split !== undefined) return split;
    if (isTransientMongoError(err) && !operationsAborted(err)) throw new TransientStoreError(err);
    const outcomes = insertOutcomes(err, docs.length);
    if (outcomes !== undefined) return outcomes;
  }
  const outcomes: InsertOutcome[] = [];
  for (const doc of docs) outcomes.push(await insertOne(col, doc));
  return outcomes;
}

/** Per document, from an insertMany's bulk error; undefined when the error does not account for every one. Exported for its unit test. */
export function insertOutcomes(err: unknown, count: number): InsertOutcome[] | undefined {
  return outcomesOfBulkError<InsertOutcome>(err, count, {
    applied: (result) => result.insertedCount,
    ok: INSERTED,
    failed: (code, message) => (code === 11000 ? PRESENT : { kind: 'rejected', error: message }),
  });
}

async function insertOne<D extends { _id: string }>(col: Collection<D>, doc: D): Promise<InsertOutcome> {
  try {
    await col.insertOne(doc as OptionalUnlessRequiredId<D>);
    return INSERTED;
  } catch (err) {
    if (isDuplicateKey(err)) return PRESENT;
    if (isTransientMongoError(err)) throw new TransientStoreError(err);
    return { kind: 'rejected', error: (err as Error).message };
  }
}
