// The worker's indexes (worker/indexes.ts) for the benches that seed a store themselves.
import type { Db } from 'mongodb';
import { ensureIndexes, WORKER_INDEXES } from '../../worker/indexes.js';

/**
 * Creates the worker's indexes in `db`. With `unique: false`, its unique indexes are created with
 * the same keys but not unique: on the stand-in a unique index checks each insert by walking the
 * index entries of every one of its fields' values (DocumentDB's unique terms are per field, and
 * `record_user_unique`'s `user_id` has a handful of values over the whole collection), so a seed
 * of millions of responses with it in place, or its build afterwards, is quadratic
 * (docs/performance.md, "Reads at scale"). The read paths the benches time use the same keys
 * either way; the unique check is the worker's write path, measured there.
 */
export async function createSeedIndexes(db: Db, { unique }: { unique: boolean }): Promise<void> {
  if (unique) return ensureIndexes(db);
  for (const { collection, index } of WORKER_INDEXES) await db.collection(collection).createIndexes([{ ...index, unique: false }]);
}
