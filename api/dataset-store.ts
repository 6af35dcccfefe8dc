import type { DatasetAdmin } from '../shared/dataset-admin.js';
import type { IdMinter } from '../shared/ids.js';
import type { Logger } from '../shared/logger.js';
import { compileDataset, type CompiledDataset } from './dataset-validators.js';
import { createPeriodicReload, type PeriodicReload } from './periodic-reload.js';

/** What a request needs: the compiled definitions, by dataset id and by record-id fingerprint. */
export interface DatasetRegistry {
  byId(datasetId: string): CompiledDataset | undefined;
  /**
   * The defined datasets whose fingerprint (under any signing secret) is `fingerprint`: usually
   * none or one; two or more only when two defined datasets' 32-bit fingerprints collide.
   */
  byFingerprint(fingerprint: number): readonly CompiledDataset[];
  readonly size: number;
  /** Whether the definitions were loaded since the process started. */
  loaded(): boolean;
}

/** The definitions, reloaded as the key store reloads keys (see PeriodicReload). */
interface DatasetStore extends DatasetRegistry, PeriodicReload {}

interface Snapshot {
  readonly byId: ReadonlyMap<string, CompiledDataset>;
  readonly byFingerprint: ReadonlyMap<number, readonly CompiledDataset[]>;
}

const NONE: readonly CompiledDataset[] = Object.freeze([]);

/**
 * The dataset definitions of `feedback_datasets`, compiled and held in memory: a write never
 * waits for MongoDB. A definition is compiled again only when its `updated_at` changed.
 */
export function createDatasetStore(options: { admin: DatasetAdmin; ids: IdMinter; refreshMs: number; logger: Logger }): DatasetStore {
  const { admin, ids, refreshMs, logger } = options;
  let snapshot: Snapshot = { byId: new Map(), byFingerprint: new Map() };
  const reportedCollisions = new Set<string>();

  // A failed load keeps the last set: a write is checked against the definitions known before the outage.
  async function load(timeoutMs: number | undefined): Promise<number> {
    const { definitions, invalid } = await admin.all(timeoutMs === undefined ? {} : { timeoutMs });
    if (invalid.length > 0) logger.warn({ datasets: invalid }, 'stored dataset definitions that do not follow the rules; ignored');
    const nextById = new Map<string, CompiledDataset>();
    const nextByFingerprint = new Map<number, CompiledDataset[]>();
    for (const definition of definitions) {
      const held = snapshot.byId.get(definition.id);
      const compiled = held !== undefined && held.definition.updated_at === definition.updated_at ? held : compileDataset(definition);
      nextById.set(definition.id, compiled);
      for (const fp of new Set(ids.datasetFingerprints(definition.id))) {
        const list = nextByFingerprint.get(fp);
        if (list === undefined) nextByFingerprint.set(fp, [compiled]);
        else {
          list.push(compiled);
          const names = list.map((c) => c.definition.id).join(',');
          if (!reportedCollisions.has(names)) {
            reportedCollisions.add(names);
            logger.warn({ datasets: list.map((c) => c.definition.id) }, 'defined datasets share a record-id fingerprint: responses to their records look the record up in MongoDB');
          }
        }
      }
    }
    snapshot = { byId: nextById, byFingerprint: nextByFingerprint };
    return nextById.size;
  }

  const reload = createPeriodicReload({ load, refreshMs, logger, what: 'dataset definitions', held: () => snapshot.byId.size });
  return {
    byId: (datasetId) => snapshot.byId.get(datasetId),
    byFingerprint: (fingerprint) => snapshot.byFingerprint.get(fingerprint) ?? NONE,
    get size() {
      return snapshot.byId.size;
    },
    ...reload,
  };
}
