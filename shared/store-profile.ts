import type { Db } from 'mongodb';

/**
 * What the worker may rely on from the store, read once at start-up. Both report each failed
 * document of an unordered insertMany. MongoDB applies a conditional update atomically, reports
 * each failed operation of an update command and serves `$in` from an index. FerretDB v1 runs an
 * update as an unlocked read-modify-write, stops an update command at its first error (its error
 * indexes cannot be trusted), evaluates `$in` by scanning, and stops answering when one command
 * holds too many open cursors: the worker then takes leases around updates, repeats a failed
 * update command one operation at a time, looks records up one `_id` at a time, and keeps update
 * commands small. FerretDB v1's `$set` also leaves a field unchanged when the new value is a
 * document holding the same values under other keys (`{"i": 1}` → `{"x": 1}`), so there the
 * worker clears `values` first.
 */
export interface StoreProfile {
  readonly name: 'mongodb' | 'ferretdb';
  /** A conditional update is atomic: no lease is needed around it. */
  readonly atomicUpdates: boolean;
  /** An unordered update command applies every operation it can and reports each failed one. */
  readonly reliableUpdateErrors: boolean;
  /** `{_id: {$in: …}}` is an index lookup, not a scan. */
  readonly indexedIn: boolean;
  /** Most operations in one update command. */
  readonly updateBatchSize: number;
  /** `$set` of a document replaces it even when only its keys differ (else `values` is cleared first). */
  readonly setReplacesDocuments: boolean;
}

export const STORE_PROFILES = {
  mongodb: { name: 'mongodb', atomicUpdates: true, reliableUpdateErrors: true, indexedIn: true, updateBatchSize: 1000, setReplacesDocuments: true },
  ferretdb: { name: 'ferretdb', atomicUpdates: false, reliableUpdateErrors: false, indexedIn: false, updateBatchSize: 10, setReplacesDocuments: false },
} as const satisfies Record<string, StoreProfile>;

/** `setting` forces a profile; `auto` asks the server (FerretDB names itself in buildInfo). */
export async function detectStoreProfile(db: Db, setting: 'auto' | 'mongodb' | 'ferretdb'): Promise<StoreProfile> {
  if (setting !== 'auto') return STORE_PROFILES[setting];
  const info = await db.admin().command({ buildInfo: 1 });
  return 'ferretdbVersion' in info ? STORE_PROFILES.ferretdb : STORE_PROFILES.mongodb;
}
