import { MongoClient, type Db, type MongoClientOptions } from 'mongodb';
import type { Config } from './config.js';

export const COLLECTIONS = {
  records: 'feedback_records',
  responses: 'feedback_responses',
  /** Short-lived claims on responses, for stores whose updates are not atomic (worker/leases.ts). */
  responseLeases: 'feedback_response_leases',
  /** Small service state, e.g. the acceptance-order floor (api/order-floor.ts). */
  meta: 'feedback_meta',
  deadLetters: 'feedback_dead_letters',
  /** Keys managed with `npm run keys`, by SHA-256 of the secret (see shared/api-keys.ts). */
  apiKeys: 'api_keys',
  /** Dataset definitions, by dataset id (see shared/dataset-admin.ts). */
  datasets: 'feedback_datasets',
} as const;

export interface MongoHandle {
  readonly client: MongoClient;
  readonly db: Db;
  close(): Promise<void>;
}

/**
 * Options every MongoClient of this project needs, whatever it is for (service, tests, bench).
 *
 * js-bson looks each array's name up in `fieldsAsRaw` without an own-property check, and the
 * driver's default is `{}`: an array under a key named like an Object.prototype member
 * ("toString", "valueOf"…, valid keys of `field_to_value` and `values`) would be read back with
 * its sub-documents as raw BSON Buffers. A prototype-less object matches no name.
 */
export function mongoClientOptions(): MongoClientOptions {
  return { fieldsAsRaw: Object.create(null) as Record<string, never> };
}

/** Connects lazily: the driver reconnects by itself after an outage. */
export function createMongo(config: Pick<Config, 'mongodbUri' | 'mongodbDatabase' | 'mongodbTimeoutMs'>): MongoHandle {
  const client = new MongoClient(config.mongodbUri, {
    ...mongoClientOptions(),
    serverSelectionTimeoutMS: config.mongodbTimeoutMs,
    connectTimeoutMS: config.mongodbTimeoutMs,
    socketTimeoutMS: Math.max(config.mongodbTimeoutMs * 6, 30_000),
    // Retried once by the driver after a replica-set election (MongoDB); a standalone server
    // (FerretDB) offers no retryable writes and the driver then sends none. Our writes are
    // idempotent either way.
    retryWrites: true,
    appName: 'feedback-ingest',
  });
  return { client, db: client.db(config.mongodbDatabase), close: () => client.close() };
}
