import { MongoClient, type Db, type MongoClientOptions } from 'mongodb';
import type { Config } from './config.js';

export const COLLECTIONS = {
  records: 'feedback_records',
  responses: 'feedback_responses',
  /** Model suggestions, one per (record, question, agent) (worker/suggestions.ts). */
  suggestions: 'feedback_suggestions',
  /** Small service state, e.g. the acceptance-order floor (api/order-floor.ts). */
  meta: 'feedback_meta',
  deadLetters: 'feedback_dead_letters',
  /** Keys managed with `npm run keys`, by SHA-256 of the secret (see shared/api-keys.ts). */
  apiKeys: 'api_keys',
  /** Dataset definitions, by dataset id (see shared/dataset-admin.ts). */
  datasets: 'feedback_datasets',
  /** Erasures and their tombstones, by erasure id (see shared/erasures.ts). */
  erasures: 'feedback_erasures',
  /** Webhook endpoints (see shared/webhook-admin.ts). */
  webhookEndpoints: 'webhook_endpoints',
  /** Webhook events waiting for, or done with, their delivery: one document per (endpoint, event). */
  webhookOutbox: 'webhook_outbox',
  /**
   * Webhook events as store rounds append them: one document per (endpoint, append), holding its
   * events in order, moved into `webhook_outbox` a few hundred at a time as deliveries need them
   * (worker/webhook-fan-out.ts).
   */
  webhookBatches: 'webhook_batches',
  /** The completion recount that owns each record's status now, by record id (worker/completion.ts). */
  completionGuards: 'feedback_completion_guards',
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

export type MongoDurabilitySettings = Pick<Config, 'mongodbWriteConcern' | 'mongodbJournal' | 'mongodbReadPreference'>;

/**
 * Write concern and read preference from the settings. Options given here win over the same
 * options in `MONGODB_URI`, so a field the operator left to the server (`w=server`, journal
 * `false`) is not set at all: the URI's value, else the server's default, applies.
 */
export function mongoDurabilityOptions(config: MongoDurabilitySettings): MongoClientOptions {
  const w = config.mongodbWriteConcern === 'server' ? {} : { w: config.mongodbWriteConcern === 'majority' ? ('majority' as const) : 1 };
  const journal = config.mongodbJournal ? { journal: true } : {};
  return { ...w, ...journal, readPreference: config.mongodbReadPreference };
}

/**
 * The handle's database read from the primary whatever `MONGODB_READ_PREFERENCE` says: for reads
 * that decide what is written (a record's existence, the order floor), where a lagging secondary
 * would defer a response or lower an order.
 */
export function primaryDb(handle: MongoHandle): Db {
  return handle.client.db(handle.db.databaseName, { readPreference: 'primary' });
}

/** How long a socket of the service's MongoDB clients may stay silent: 6× MONGODB_TIMEOUT_MS, at least 30 s. */
export function socketTimeoutMs(config: Pick<Config, 'mongodbTimeoutMs'>): number {
  return Math.max(config.mongodbTimeoutMs * 6, 30_000);
}

/** Connects at once, and again until it succeeds (below); after that the driver reconnects by itself after an outage. */
export function createMongo(config: Pick<Config, 'mongodbUri' | 'mongodbDatabase' | 'mongodbTimeoutMs'> & MongoDurabilitySettings): MongoHandle {
  const client = new MongoClient(config.mongodbUri, {
    ...mongoClientOptions(),
    ...mongoDurabilityOptions(config),
    serverSelectionTimeoutMS: config.mongodbTimeoutMs,
    connectTimeoutMS: config.mongodbTimeoutMs,
    socketTimeoutMS: socketTimeoutMs(config),
    // Retried once by the driver after a replica-set election or a lost connection (MongoDB
    // replica sets and sharded clusters); a standalone server (FerretDB) offers no retryable
    // writes and the driver then sends none. Our writes are idempotent either way, and a write
    // still failing after the retry pauses the queue (worker/errors.ts). Wins over the URI's.
    retryWrites: true,
    appName: 'feedback-ingest',
  });
  // The driver connects on the first operation; when that connect fails (the store not up yet),
  // the client keeps a closed topology and every later operation fails with "Topology is closed",
  // also once the store is back: a process started during an outage never reached it (an
  // outside-in check: API and worker still failing 7 minutes after the store came back). An
  // explicit connect() opens it again, so it is repeated until one succeeds; after that the
  // driver's monitors follow the store by themselves.
  let closed = false;
  void (async () => {
    while (!closed) {
      try {
        await client.connect();
        if (closed) await client.close();
        return;
      } catch {
        // Soon: the start-up loads (keys, definitions, the order floor) wait for this connection.
        await new Promise((resolve) => setTimeout(resolve, Math.min(config.mongodbTimeoutMs, 1_000)).unref());
      }
    }
  })();
  return {
    client,
    db: client.db(config.mongodbDatabase),
    close: () => {
      closed = true;
      return client.close();
    },
  };
}
