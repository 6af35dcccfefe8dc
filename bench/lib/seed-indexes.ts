// The worker's indexes (worker/indexes.ts) for the benches that seed a store themselves.
import type { Db } from 'mongodb';
import { ensureIndexes, WORKER_INDEXES } from '../../worker/indexes.js';

/**
 * Creates the worker's indexes in `db`. No index of the worker is unique since 2026-11-26 (the
 * response `_id` keeps one response per record and annotator), so `unique` changes nothing for
 * them today; it is kept so that a bench can still force every index non-unique if one ever is
 * again (on the stand-in a unique index checks each insert by walking the entries of its fields'
 * values, quadratic over a seed: docs/performance.md, "Reads at scale").
 */
export async function createSeedIndexes(db: Db, { unique }: { unique: boolean }): Promise<void> {
  if (unique) return ensureIndexes(db);
  for (const { collection, index } of WORKER_INDEXES) await db.collection(collection).createIndexes([{ ...index, unique: false }]);
}
