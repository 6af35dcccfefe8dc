import type { Db, IndexDescription } from 'mongodb';
import { COLLECTIONS } from '../shared/mongo.js';
import { isTransientMongoError, TransientStoreError } from './errors.js';

/** The indexes the worker's writes and the expected reads need (idempotent to create). */
const INDEXES: readonly { readonly collection: string; readonly index: IndexDescription }[] = [
  // The read API pages a dataset by (created_at, _id) both ways and exports it by dataset.
  { collection: COLLECTIONS.records, index: { key: { feedback_dataset_id: 1, created_at: 1, _id: 1 }, name: 'dataset_created_id' } },
  { collection: COLLECTIONS.records, index: { key: { feedback_dataset_id: 1, external_id: 1 }, name: 'dataset_external_id' } },
  { collection: COLLECTIONS.responses, index: { key: { feedback_record_id: 1, user_id: 1 }, name: 'record_user_unique', unique: true } },
  // Also the read API's `updated_since` (responses of a dataset changed since a time).
  { collection: COLLECTIONS.responses, index: { key: { feedback_dataset_id: 1, updated_at: 1 }, name: 'dataset_updated' } },
  // The agreement endpoint reads a dataset's submitted responses in record order, a unit at a time.
  { collection: COLLECTIONS.responses, index: { key: { feedback_dataset_id: 1, status: 1, feedback_record_id: 1 }, name: 'dataset_status_record' } },
  { collection: COLLECTIONS.deadLetters, index: { key: { failed_at: 1 }, name: 'failed_at' } },
  // Webhook deliveries: the dispatcher's scan of an endpoint's pending events in order, and a record's events of an endpoint.
  { collection: COLLECTIONS.webhookOutbox, index: { key: { endpoint_id: 1, status: 1, seq: 1, rank: 1 }, name: 'endpoint_status_seq' } },
  { collection: COLLECTIONS.webhookOutbox, index: { key: { endpoint_id: 1, key: 1, status: 1, seq: 1 }, name: 'endpoint_key_status' } },
];

/** An index the store refuses for good (options conflicting with an existing index of that name…). */
export class IndexSetupError extends Error {
  constructor(collection: string, name: string, cause: unknown) {
    super(`cannot create index ${name} on ${collection}: ${(cause as Error).message}`, { cause });
    this.name = 'IndexSetupError';
  }
}

/**
 * Creates the indexes, one per command, so that a refused one is named. Throws {@link TransientStoreError} while the store is unreachable (the
 * caller retries) and {@link IndexSetupError} for anything else (the caller stops).
 */
export async function ensureIndexes(db: Db): Promise<void> {
  for (const { collection, index } of INDEXES) {
    try {
      await db.collection(collection).createIndexes([index]);
    } catch (err) {
      if (isTransientMongoError(err)) throw new TransientStoreError(err);
      throw new IndexSetupError(collection, index.name ?? 'index', err);
    }
  }
}
