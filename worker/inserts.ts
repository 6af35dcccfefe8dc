import { MongoBulkWriteError, type Collection, type OptionalUnlessRequiredId } from 'mongodb';
import { isDuplicateKey, isTransientMongoError, TransientStoreError } from './errors.js';

/** What became of one document: newly inserted, already there (same _id), or refused for good. */
type InsertOutcome = { readonly kind: 'inserted' } | { readonly kind: 'present' } | { readonly kind: 'rejected'; readonly error: string };

const INSERTED: InsertOutcome = { kind: 'inserted' };
const PRESENT: InsertOutcome = { kind: 'present' };

/**
 * Inserts documents whose _id was minted by the API, so a duplicate key means "stored before"
 * (a job run twice). One unordered insertMany, whose per-document errors say which documents
 * failed (MongoDB and FerretDB alike); any other error is resolved one document at a time
 * (repeating an insert that did apply only meets its own duplicate). Throws
 * {@link TransientStoreError} when the store cannot be reached.
 */
export async function insertNew<D extends { _id: string }>(col: Collection<D>, docs: readonly D[]): Promise<InsertOutcome[]> {
  if (docs.length === 0) return [];
  try {
    await col.insertMany(docs as OptionalUnlessRequiredId<D>[], { ordered: false });
    return docs.map(() => INSERTED);
  } catch (err) {
    if (isTransientMongoError(err)) throw new TransientStoreError(err);
    if (accountsForEveryDocument(err, docs.length)) return fromBulkError(err, docs.length);
  }
  const outcomes: InsertOutcome[] = [];
  for (const doc of docs) outcomes.push(await insertOne(col, doc));
  return outcomes;
}

/**
 * True when a bulk error says what became of every document: inserted ones counted, each other
 * one with its own error. A connection lost mid-command also arrives as a MongoBulkWriteError,
 * with no per-document errors at all: reading that as "all inserted" would lose them.
 */
export function accountsForEveryDocument(err: unknown, count: number): err is MongoBulkWriteError {
  if (!(err instanceof MongoBulkWriteError)) return false;
  const writeErrors = Array.isArray(err.writeErrors) ? err.writeErrors : [err.writeErrors];
  return writeErrors.length > 0 && err.result.insertedCount + writeErrors.length === count;
}

/** Exported for its unit test. */
export function fromBulkError(err: MongoBulkWriteError, count: number): InsertOutcome[] {
  const outcomes: InsertOutcome[] = new Array<InsertOutcome>(count).fill(INSERTED);
  const writeErrors = Array.isArray(err.writeErrors) ? err.writeErrors : [err.writeErrors];
  for (const e of writeErrors) {
    if (e.index < 0 || e.index >= count) continue;
    outcomes[e.index] = e.code === 11000 ? PRESENT : { kind: 'rejected', error: e.errmsg ?? `store error ${e.code}` };
  }
  return outcomes;
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
