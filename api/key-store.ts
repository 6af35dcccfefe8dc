import type { Db } from 'mongodb';
import * as v from 'valibot';
import { StoredApiKey, type ApiKeyDoc } from '../shared/api-keys.js';
import { sha256 } from '../shared/digest.js';
import type { Logger } from '../shared/logger.js';
import { COLLECTIONS } from '../shared/mongo.js';
import { createVerifiedTokens, type AuthenticatedKey, type KeyVerifier } from './key-verifier.js';
import { createPeriodicReload, type PeriodicReload } from './periodic-reload.js';

interface KeyStoreOptions {
  readonly db: Db;
  /** Time between two loads of the active keys, ms (`API_KEYS_REFRESH_MS`, default 5000). */
  readonly refreshMs: number;
  readonly logger: Logger;
}

/** The stored keys, reloaded like every set the API holds (see PeriodicReload). */
interface KeyStore extends KeyVerifier, PeriodicReload {}

/**
 * The keys of the `api_keys` collection, held in memory: a request never waits for MongoDB.
 * Tokens are looked up by their SHA-256 digest, so the lookup reveals nothing about a secret
 * through timing. A revoked key stops working within one refresh interval.
 */
export function createKeyStore(options: KeyStoreOptions): KeyStore {
  const { db, refreshMs, logger } = options;
  const col = db.collection<ApiKeyDoc>(COLLECTIONS.apiKeys);
  let keys = new Map<string, AuthenticatedKey>();
  // Forgotten at every load, so that a revoked key stops within one refresh, as before.
  const verified = createVerifiedTokens();

  // `timeoutMs` bounds the whole load, server selection included (the driver's `timeoutMS`). A
  // failed load keeps the last loaded set: revocations made during the outage wait for MongoDB,
  // but every key that worked keeps working.
  async function load(timeoutMs: number | undefined): Promise<number> {
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
    verified.clear();
    return next.size;
  }

  const reload = createPeriodicReload({ load, refreshMs, logger, what: 'stored API keys', held: () => keys.size });
  return {
    verify(token) {
      const known = verified.get(token);
      if (known !== undefined) return known;
      const key = keys.get(sha256(token).toString('hex'));
      if (key !== undefined) verified.remember(token, key);
      return key;
    },
    complete: reload.loaded,
    ...reload,
  };
}
