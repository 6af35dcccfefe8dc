import { MongoClient, type Db } from 'mongodb';
import type { Config } from './config.js';

export const COLLECTIONS = {
  records: 'feedback_records',
  responses: 'feedback_responses',
  /** Ordering log of response updates; pruned down to the newest version per response. */
  responseVersions: 'feedback_response_versions',
  deadLetters: 'feedback_dead_letters',
} as const;

export interface MongoHandle {
  readonly client: MongoClient;
  readonly db: Db;
  close(): Promise<void>;
}

/** Connects lazily: the driver reconnects by itself after an outage. */
export function createMongo(config: Pick<Config, 'mongodbUri' | 'mongodbDatabase' | 'mongodbTimeoutMs'>): MongoHandle {
  const client = new MongoClient(config.mongodbUri, {
    serverSelectionTimeoutMS: config.mongodbTimeoutMs,
    connectTimeoutMS: config.mongodbTimeoutMs,
    socketTimeoutMS: Math.max(config.mongodbTimeoutMs * 6, 30_000),
    // FerretDB v1 has no retryable writes; our writes are idempotent upserts anyway.
    retryWrites: false,
    appName: 'feedback-ingest',
  });
  return { client, db: client.db(config.mongodbDatabase), close: () => client.close() };
}
