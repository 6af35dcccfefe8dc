import { createHash, randomBytes } from 'node:crypto';
import type { Collection, Db } from 'mongodb';
import * as v from 'valibot';
import { KEY_NAME_RE } from './config.js';
import { COLLECTIONS } from './mongo.js';
import { DatasetId } from './schemas.js';

/**
 * A key managed with `npm run keys`, in the `api_keys` collection. The secret is never stored:
 * `_id` is the hex SHA-256 of it, which is all the API needs to recognise a token.
 */
export interface ApiKeyDoc {
  readonly _id: string;
  readonly name: string;
  /** Datasets the key may write to; null = any. */
  readonly datasets: string[] | null;
  readonly admin: boolean;
  /** May read its datasets (`npm run keys -- create --read`); absent (keys stored before the read scope) = false. */
  readonly read?: boolean;
  /** The key's own write limit per minute; absent = `RATE_LIMIT_PER_MINUTE`. */
  readonly rate_limit_per_minute?: number;
  readonly created_at: Date;
  /** Set by `keys revoke`; a revoked key stays for the record but authenticates nothing. */
  readonly revoked_at: Date | null;
}

/** What the API reads of a stored key; documents that do not match are skipped (and logged). */
export const StoredApiKey = v.object({
  _id: v.pipe(v.string(), v.regex(/^[0-9a-f]{64}$/)),
  name: v.pipe(v.string(), v.regex(KEY_NAME_RE)),
  datasets: v.nullable(v.array(DatasetId)),
  admin: v.boolean(),
  read: v.exactOptional(v.boolean()),
  rate_limit_per_minute: v.exactOptional(v.pipe(v.number(), v.safeInteger(), v.minValue(0))),
});
export type StoredApiKey = v.InferOutput<typeof StoredApiKey>;

/** Every generated secret starts with this, so a leaked one is easy to recognise (secret scanners). */
const API_KEY_SECRET_PREFIX = 'fik_';

/** `fik_` + 32 random bytes in base64url (43 characters). */
function generateApiKeySecret(): string {
  return API_KEY_SECRET_PREFIX + randomBytes(32).toString('base64url');
}

/** The `_id` of the key whose secret is `secret`. */
function apiKeyDigestHex(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex');
}

/** An operator's mistake (name taken, no such key, bad value): the CLI prints the message and exits 1. */
export class ApiKeyAdminError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ApiKeyAdminError';
  }
}

interface NewApiKey {
  readonly name: string;
  /** Datasets the key may write to; absent or null = any. */
  readonly datasets?: readonly string[] | null;
  readonly admin?: boolean;
  /** May read its datasets; default false (write-only). */
  readonly read?: boolean;
  readonly rateLimitPerMinute?: number;
}

/** A key as `keys list` shows it: never the secret, nor its digest. */
export interface ApiKeySummary {
  readonly name: string;
  readonly datasets: readonly string[] | null;
  readonly admin: boolean;
  readonly read: boolean;
  readonly rate_limit_per_minute: number | null;
  readonly created_at: Date;
  readonly revoked_at: Date | null;
}

export interface ApiKeyAdmin {
  /** Stores a new key and returns its secret, which exists nowhere else afterwards. */
  create(input: NewApiKey): Promise<{ readonly secret: string; readonly key: ApiKeySummary }>;
  /** Active keys, oldest first; with `includeRevoked`, revoked ones too. */
  list(options?: { includeRevoked?: boolean }): Promise<ApiKeySummary[]>;
  /** Revokes the active key named `name`; throws {@link ApiKeyAdminError} when there is none. */
  revoke(name: string): Promise<void>;
}

const RATE_LIMIT_MAX = 10_000_000;

function summary(doc: ApiKeyDoc): ApiKeySummary {
  return {
    name: doc.name,
    datasets: doc.datasets,
    admin: doc.admin,
    read: doc.read ?? false,
    rate_limit_per_minute: doc.rate_limit_per_minute ?? null,
    created_at: doc.created_at,
    revoked_at: doc.revoked_at,
  };
}

/**
 * Creates, lists and revokes the keys of the `api_keys` collection. `reservedNames` are the names
 * of `API_KEYS`: a stored key may not take one, or two keys would write as the same annotator.
 * Names are unique among active keys; a revoked key's name may be reused.
 */
export function createApiKeyAdmin(options: { db: Db; reservedNames: readonly string[] }): ApiKeyAdmin {
  const col: Collection<ApiKeyDoc> = options.db.collection<ApiKeyDoc>(COLLECTIONS.apiKeys);
  const reserved = new Set(options.reservedNames);
  return {
    async create(input) {
      if (!KEY_NAME_RE.test(input.name)) throw new ApiKeyAdminError(`name must be 1-64 of [A-Za-z0-9_.@-], got ${JSON.stringify(input.name)}`);
      if (reserved.has(input.name)) throw new ApiKeyAdminError(`name "${input.name}" is already a key of API_KEYS`);
      let datasets: string[] | null = null;
      if (input.datasets !== undefined && input.datasets !== null) {
        if (input.datasets.length === 0) throw new ApiKeyAdminError('datasets must name at least one dataset (leave it out for any dataset)');
        for (const d of input.datasets) {
          if (!v.is(DatasetId, d)) throw new ApiKeyAdminError(`dataset ${JSON.stringify(d)} is not a valid feedback_dataset_id (1-256 characters)`);
        }
        datasets = [...new Set(input.datasets)];
      }
      const limit = input.rateLimitPerMinute;
      if (limit !== undefined && (!Number.isSafeInteger(limit) || limit < 1 || limit > RATE_LIMIT_MAX)) {
        throw new ApiKeyAdminError(`rate limit must be a whole number from 1 to ${RATE_LIMIT_MAX} per minute`);
      }
      // Check-then-insert: two operators creating the same name in the same instant could both
      // pass. A CLI run by hand makes that unlikely, and the API would still tell the keys apart.
      if ((await col.findOne({ name: input.name, revoked_at: null })) !== null) {
        throw new ApiKeyAdminError(`an active key is already named "${input.name}" (revoke it first)`);
      }
      const secret = generateApiKeySecret();
      const doc: ApiKeyDoc = {
        _id: apiKeyDigestHex(secret),
        name: input.name,
        datasets,
        admin: input.admin ?? false,
        read: input.read ?? false,
        ...(limit === undefined ? {} : { rate_limit_per_minute: limit }),
        created_at: new Date(),
        revoked_at: null,
      };
      await col.insertOne(doc);
      return { secret, key: summary(doc) };
    },
    async list(listOptions = {}) {
      const filter = listOptions.includeRevoked === true ? {} : { revoked_at: null };
      const docs = await col.find(filter).sort({ created_at: 1, name: 1 }).toArray();
      return docs.map(summary);
    },
    async revoke(name) {
      const result = await col.updateMany({ name, revoked_at: null }, { $set: { revoked_at: new Date() } });
      if (result.matchedCount === 0) throw new ApiKeyAdminError(`no active key is named "${name}"`);
    },
  };
}
