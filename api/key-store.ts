import { createHash } from 'node:crypto';
import type { Db } from 'mongodb';
import * as v from 'valibot';
import { StoredApiKey, type ApiKeyDoc } from '../shared/api-keys.js';
import type { Logger } from '../shared/logger.js';
import { COLLECTIONS } from '../shared/mongo.js';
import type { AuthenticatedKey, KeyVerifier } from './middleware/auth.js';

interface KeyStoreOptions {
  readonly db: Db;
  /** Time between two loads of the active keys, ms (`API_KEYS_REFRESH_MS`, default 5000). */
  readonly refreshMs: number;
  readonly logger: Logger;
}

interface KeyStore extends KeyVerifier {
  /**
   * Loads the keys once, then every `refreshMs`. Resolves when the first load succeeded or failed,
   * which takes `firstLoadTimeoutMs` at the most: the API starts with the keys of `API_KEYS` alone
   * while MongoDB is down, and picks up the stored keys at the first refresh that succeeds.
   */
  start(firstLoadTimeoutMs: number): Promise<void>;
  /** One load now; false when MongoDB did not answer (the last loaded keys stay in use). */
  refresh(): Promise<boolean>;
  /** Stops refreshing and waits for a load in flight, so that MongoDB can be closed after it. */
  close(): Promise<void>;
}

/**
 * The keys of the `api_keys` collection, held in memory: a request never waits for MongoDB.
 * Tokens are looked up by their SHA-256 digest, so the lookup reveals nothing about a secret
 * through timing. A revoked key stops working within one refresh interval.
 */
export function createKeyStore(options: KeyStoreOptions): KeyStore {
  const { db, refreshMs, logger } = options;
  const col = db.collection<ApiKeyDoc>(COLLECTIONS.apiKeys);
  let keys = new Map<string, AuthenticatedKey>();
  let failing = false;
  let inFlight: Promise<boolean> | undefined;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;

  /** `timeoutMs` bounds the whole load, server selection included (the driver's `timeoutMS`). */
  async function load(timeoutMs?: number): Promise<boolean> {
    try {
      const docs = await col.find({ revoked_at: null }, timeoutMs === undefined ? {} : { timeoutMS: timeoutMs }).toArray();
      const next = new Map<string, AuthenticatedKey>();
      for (const doc of docs) {
        const parsed = v.safeParse(StoredApiKey, doc);
        if (!parsed.success) {
          logger.warn({ key_name: typeof doc.name === 'string' ? doc.name : undefined }, 'stored API key does not match the expected shape; ignored');
          continue;
        }
        const k = parsed.output;
        next.set(k._id, Object.freeze({
          name: k.name,
          datasets: k.datasets === null ? null : Object.freeze([...k.datasets]),
          admin: k.admin,
          // Keys stored before the read scope existed have no flag: they stay write-only.
          read: k.read ?? false,
          ...(k.rate_limit_per_minute === undefined ? {} : { rateLimitPerMinute: k.rate_limit_per_minute }),
        }));
      }
      keys = next;
      if (failing) logger.info({ keys: next.size }, 'stored API keys loaded again');
      failing = false;
      return true;
    } catch (err) {
      // Keep the last loaded set: revocations made during the outage wait for MongoDB, but
      // every key that worked keeps working.
      if (!failing) logger.warn({ err: (err as Error).message, keys: keys.size }, 'could not load the stored API keys; keeping the last loaded ones');
      failing = true;
      return false;
    }
  }

  function refresh(timeoutMs?: number): Promise<boolean> {
    inFlight ??= load(timeoutMs).finally(() => {
      inFlight = undefined;
    });
    return inFlight;
  }

  function schedule(): void {
    if (stopped) return;
    timer = setTimeout(() => {
      void refresh().then(schedule);
    }, refreshMs);
    timer.unref();
  }

  return {
    verify(token) {
      return keys.get(createHash('sha256').update(token, 'utf8').digest('hex'));
    },
    refresh: () => refresh(),
    async start(firstLoadTimeoutMs) {
      await refresh(firstLoadTimeoutMs);
      schedule();
    },
    async close() {
      stopped = true;
      clearTimeout(timer);
      await inFlight;
    },
  };
}
