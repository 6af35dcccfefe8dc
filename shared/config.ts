import { createHash } from 'node:crypto';
import * as v from 'valibot';
import { JOB_COMPRESSIONS, type JobCompression } from './job-payload.js';

/** One configured API key. The secret itself is never kept: only its SHA-256 digest. */
export interface ApiKeyConfig {
  readonly name: string;
  /** SHA-256 of the secret, 32 bytes. */
  readonly digest: Buffer;
}

/** What an API key name may be (env keys and stored keys alike): it ends up as `api_key` and default `user_id`. */
export const KEY_NAME_RE = /^[A-Za-z0-9_.@-]{1,64}$/;
const SHA256_HEX_RE = /^[0-9a-fA-F]{64}$/;

/** Thrown by {@link loadConfig}; `message` is the one line printed before exit. */
export class ConfigError extends Error {
  readonly variable: string;
  constructor(variable: string, problem: string) {
    super(`invalid configuration: ${variable} ${problem}`);
    this.name = 'ConfigError';
    this.variable = variable;
  }
}

function parseApiKeys(raw: string): ApiKeyConfig[] {
  const keys: ApiKeyConfig[] = [];
  const names = new Set<string>();
  for (const entry of raw.split(',').map((s) => s.trim()).filter((s) => s.length > 0)) {
    const colon = entry.indexOf(':');
    if (colon <= 0) throw new ConfigError('API_KEYS', 'must be comma-separated name:secret pairs');
    const name = entry.slice(0, colon);
    const secret = entry.slice(colon + 1);
    if (!KEY_NAME_RE.test(name)) throw new ConfigError('API_KEYS', `has a key name that is not 1-64 of [A-Za-z0-9_.@-]`);
    if (names.has(name)) throw new ConfigError('API_KEYS', `names the key "${name}" twice`);
    names.add(name);
    let digest: Buffer;
    if (secret.startsWith('sha256:')) {
      const hex = secret.slice('sha256:'.length);
      if (!SHA256_HEX_RE.test(hex)) throw new ConfigError('API_KEYS', `key "${name}": sha256: must be followed by 64 hex digits`);
      digest = Buffer.from(hex, 'hex');
    } else {
      if (secret.length < 8) throw new ConfigError('API_KEYS', `key "${name}": secret must be at least 8 characters`);
      digest = createHash('sha256').update(secret, 'utf8').digest();
    }
    keys.push(Object.freeze({ name, digest }));
  }
  return keys;
}

const int = (name: string, def: number, min: number, max: number) =>
  v.pipe(
    v.optional(v.string(), String(def)),
    v.regex(/^\d+$/, `${name} must be a whole number`),
    v.transform(Number),
    v.minValue(min, `${name} must be at least ${min}`),
    v.maxValue(max, `${name} must be at most ${max}`),
  );

const bool = (name: string, def: boolean) =>
  v.pipe(
    v.optional(v.string(), String(def)),
    v.picklist(['true', 'false', '1', '0'], `${name} must be true or false`),
    v.transform((s) => s === 'true' || s === '1'),
  );

const url = (name: string, def: string, schemes: readonly string[]) =>
  v.pipe(
    v.optional(v.string(), def),
    v.check((s) => {
      try {
        return schemes.includes(new URL(s).protocol);
      } catch {
        return false;
      }
    }, `${name} must be a URL starting with ${schemes.map((p) => `${p}//`).join(' or ')}`),
  );

const EnvSchema = v.object({
  NODE_ENV: v.optional(v.string(), 'development'),
  PORT: int('PORT', 3000, 0, 65535),
  HOST: v.optional(v.string(), '0.0.0.0'),
  REDIS_URL: url('REDIS_URL', 'redis://127.0.0.1:6379', ['redis:', 'rediss:']),
  REDIS_TLS_URL: v.optional(url('REDIS_TLS_URL', 'rediss://127.0.0.1:6379', ['rediss:'])),
  REDIS_TLS_REJECT_UNAUTHORIZED: bool('REDIS_TLS_REJECT_UNAUTHORIZED', true),
  MONGODB_URI: url('MONGODB_URI', 'mongodb://127.0.0.1:27017/feedback', ['mongodb:', 'mongodb+srv:']),
  API_KEYS: v.optional(v.string(), ''),
  ADMIN_API_KEY_NAMES: v.optional(v.string(), ''),
  API_KEYS_REFRESH_MS: int('API_KEYS_REFRESH_MS', 5000, 50, 3_600_000),
  ID_SIGNING_SECRETS: v.optional(v.string()),
  QUEUE_NAME: v.pipe(v.optional(v.string(), 'feedback-writes'), v.regex(/^[A-Za-z0-9_-]{1,100}$/, 'QUEUE_NAME must be 1-100 of [A-Za-z0-9_-]')),
  BODY_LIMIT_BYTES: int('BODY_LIMIT_BYTES', 1024 * 1024, 1024, 64 * 1024 * 1024),
  QUEUE_COMPRESSION: v.optional(v.picklist(JOB_COMPRESSIONS, `QUEUE_COMPRESSION must be one of ${JOB_COMPRESSIONS.join(', ')}`), 'deflate'),
  BATCH_MAX_ITEMS: int('BATCH_MAX_ITEMS', 200, 1, 4000),
  BATCH_MAX_IN_FLIGHT: int('BATCH_MAX_IN_FLIGHT', 4, 1, 64),
  ENQUEUE_TIMEOUT_MS: int('ENQUEUE_TIMEOUT_MS', 1000, 10, 60_000),
  BACKLOG_MAX_JOBS: int('BACKLOG_MAX_JOBS', 20_000, 1, 100_000_000),
  BACKLOG_POLL_MS: int('BACKLOG_POLL_MS', 500, 10, 60_000),
  RETRY_AFTER_SECONDS: int('RETRY_AFTER_SECONDS', 1, 1, 3600),
  IDEMPOTENCY_TTL_SECONDS: int('IDEMPOTENCY_TTL_SECONDS', 86_400, 1, 30 * 86_400),
  IDEMPOTENCY_PENDING_TTL_SECONDS: int('IDEMPOTENCY_PENDING_TTL_SECONDS', 60, 1, 3600),
  RATE_LIMIT_PER_MINUTE: int('RATE_LIMIT_PER_MINUTE', 0, 0, 10_000_000),
  HTTP_REQUEST_TIMEOUT_MS: int('HTTP_REQUEST_TIMEOUT_MS', 30_000, 100, 600_000),
  HTTP_HEADERS_TIMEOUT_MS: int('HTTP_HEADERS_TIMEOUT_MS', 10_000, 100, 600_000),
  HTTP_KEEP_ALIVE_TIMEOUT_MS: int('HTTP_KEEP_ALIVE_TIMEOUT_MS', 5_000, 100, 600_000),
  WORKER_CONCURRENCY: int('WORKER_CONCURRENCY', 16, 1, 1000),
  JOB_ATTEMPTS: int('JOB_ATTEMPTS', 8, 1, 1000),
  JOB_BACKOFF_MS: int('JOB_BACKOFF_MS', 1000, 1, 3_600_000),
  JOB_LOCK_MS: int('JOB_LOCK_MS', 30_000, 1000, 3_600_000),
  JOB_MAX_STALLED: int('JOB_MAX_STALLED', 10, 0, 1000),
  JOB_STALLED_INTERVAL_MS: int('JOB_STALLED_INTERVAL_MS', 30_000, 1000, 3_600_000),
  KEEP_COMPLETED_JOBS: int('KEEP_COMPLETED_JOBS', 1000, 0, 10_000_000),
  KEEP_FAILED_JOBS: int('KEEP_FAILED_JOBS', 10_000, 0, 10_000_000),
  STORE_RETRY_MAX_DELAY_MS: int('STORE_RETRY_MAX_DELAY_MS', 10_000, 10, 3_600_000),
  MONGODB_TIMEOUT_MS: int('MONGODB_TIMEOUT_MS', 5_000, 100, 600_000),
  SHUTDOWN_TIMEOUT_MS: int('SHUTDOWN_TIMEOUT_MS', 10_000, 100, 600_000),
  WORKER_METRICS_PORT: int('WORKER_METRICS_PORT', 0, 0, 65535),
  LOG_LEVEL: v.optional(v.picklist(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], 'LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent'), 'info'),
});

const DEV_ID_SECRET = 'feedback-ingest-development-id-secret';

/** The validated, frozen configuration of both processes. Units are in the names. */
export interface Config {
  readonly nodeEnv: string;
  /** HTTP port of the API; 0 picks a free one (tests). Default 3000. */
  readonly port: number;
  readonly host: string;
  /** `REDIS_TLS_URL` when set (Heroku), else `REDIS_URL`. */
  readonly redisUrl: string;
  /** Verify the Redis TLS certificate. Heroku Redis uses a self-signed one: set false there. */
  readonly redisTlsRejectUnauthorized: boolean;
  readonly mongodbUri: string;
  /** Database name: the path of `MONGODB_URI`, default `feedback`. */
  readonly mongodbDatabase: string;
  readonly apiKeys: readonly ApiKeyConfig[];
  /** Names from `API_KEYS` that carry the admin scope (admin endpoints). Default none. */
  readonly adminApiKeyNames: readonly string[];
  /** How often each API process reloads the keys stored in MongoDB (`npm run keys`), ms. Default 5000. */
  readonly apiKeysRefreshMs: number;
  /** HMAC secrets for record ids; the first signs, all verify (rotation). */
  readonly idSigningSecrets: readonly string[];
  /** True when no ID_SIGNING_SECRETS was given and the development secret is in use. */
  readonly idSigningSecretIsDefault: boolean;
  readonly queueName: string;
  /** Largest accepted body, bytes. Default 1 MiB. */
  readonly bodyLimitBytes: number;
  /** How the API packs a job's writes for Redis: `deflate` (default) or `none` (plain JSON, readable in Redis tools). */
  readonly queueCompression: JobCompression;
  /** Most writes one queued job carries. Default 200. */
  readonly batchMaxItems: number;
  /** Most `queue.add` calls in flight per API process; more requests wait and join the next job. Default 2. */
  readonly batchMaxInFlight: number;
  /** How long the API waits for Redis to acknowledge a job before answering 503, ms. Default 1000. */
  readonly enqueueTimeoutMs: number;
  /** Waiting + delayed jobs above which writes get 503 `overloaded`. Default 20000. */
  readonly backlogMaxJobs: number;
  /** How often each API process reads the backlog, ms. Default 500. */
  readonly backlogPollMs: number;
  readonly retryAfterSeconds: number;
  readonly idempotencyTtlSeconds: number;
  readonly idempotencyPendingTtlSeconds: number;
  /** Write requests per API key per minute, shared by all API processes; 0 = no limit. A stored key's own limit wins. Default 0. */
  readonly rateLimitPerMinute: number;
  readonly httpRequestTimeoutMs: number;
  readonly httpHeadersTimeoutMs: number;
  readonly httpKeepAliveTimeoutMs: number;
  /** Jobs one worker process handles at once. Default 4. */
  readonly workerConcurrency: number;
  /** Attempts per job for non-transient failures (a response whose record is not stored yet). Default 8. */
  readonly jobAttempts: number;
  /** Base of the exponential backoff between attempts, ms. Default 1000. */
  readonly jobBackoffMs: number;
  readonly jobLockMs: number;
  readonly jobMaxStalled: number;
  /** How often the worker looks for jobs whose worker died (BullMQ stalledInterval). */
  readonly jobStalledIntervalMs: number;
  readonly keepCompletedJobs: number;
  readonly keepFailedJobs: number;
  /** Cap of the backoff while MongoDB is unreachable, ms; these retries do not use attempts. Default 10000. */
  readonly storeRetryMaxDelayMs: number;
  /** Server selection and socket timeout of the MongoDB driver, ms. Default 5000. */
  readonly mongodbTimeoutMs: number;
  /** Longest graceful shutdown before the process exits anyway, ms. Default 10000. */
  readonly shutdownTimeoutMs: number;
  /** Port of the worker's /metrics; 0 = off. Default 0. */
  readonly workerMetricsPort: number;
  readonly logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
}

/** Validates the environment once. Throws {@link ConfigError} naming the first bad variable. */
export function loadConfig(env: Readonly<Record<string, string | undefined>>): Config {
  const input: Record<string, string> = {};
  for (const key of Object.keys(EnvSchema.entries)) {
    const value = env[key];
    if (value !== undefined && value !== '') input[key] = value;
  }
  const result = v.safeParse(EnvSchema, input);
  if (!result.success) {
    const issue = result.issues[0];
    const variable = issue.path?.[0]?.key;
    const name = typeof variable === 'string' ? variable : 'environment';
    const msg = issue.message.startsWith(name) ? issue.message.slice(name.length + 1) : `is invalid: ${issue.message}`;
    throw new ConfigError(name, msg);
  }
  const e = result.output;
  const mongoPath = new URL(e.MONGODB_URI).pathname.replace(/^\//, '');
  const mongodbDatabase = mongoPath === '' ? 'feedback' : decodeURIComponent(mongoPath);
  if (!/^[A-Za-z0-9_-]{1,63}$/.test(mongodbDatabase)) {
    throw new ConfigError('MONGODB_URI', 'must name a database of 1-63 of [A-Za-z0-9_-]');
  }
  const secrets = (e.ID_SIGNING_SECRETS ?? '').split(',').map((s) => s.trim()).filter((s) => s.length > 0);
  if (secrets.some((s) => s.length < 16)) throw new ConfigError('ID_SIGNING_SECRETS', 'must hold secrets of at least 16 characters');
  if (secrets.length === 0 && e.NODE_ENV === 'production') {
    throw new ConfigError('ID_SIGNING_SECRETS', 'is required when NODE_ENV=production (a random string of 32+ characters, the same for every API process)');
  }
  const apiKeys = parseApiKeys(e.API_KEYS);
  const adminApiKeyNames = e.ADMIN_API_KEY_NAMES.split(',').map((s) => s.trim()).filter((s) => s.length > 0);
  for (const name of adminApiKeyNames) {
    if (!apiKeys.some((k) => k.name === name)) throw new ConfigError('ADMIN_API_KEY_NAMES', `names "${name}", which is not a key of API_KEYS`);
  }
  if (e.HTTP_HEADERS_TIMEOUT_MS > e.HTTP_REQUEST_TIMEOUT_MS) {
    throw new ConfigError('HTTP_HEADERS_TIMEOUT_MS', 'must not exceed HTTP_REQUEST_TIMEOUT_MS');
  }
  return Object.freeze({
    nodeEnv: e.NODE_ENV,
    port: e.PORT,
    host: e.HOST,
    redisUrl: e.REDIS_TLS_URL ?? e.REDIS_URL,
    redisTlsRejectUnauthorized: e.REDIS_TLS_REJECT_UNAUTHORIZED,
    mongodbUri: e.MONGODB_URI,
    mongodbDatabase,
    apiKeys: Object.freeze(apiKeys),
    adminApiKeyNames: Object.freeze(adminApiKeyNames),
    apiKeysRefreshMs: e.API_KEYS_REFRESH_MS,
    idSigningSecrets: Object.freeze(secrets.length > 0 ? secrets : [DEV_ID_SECRET]),
    idSigningSecretIsDefault: secrets.length === 0,
    queueName: e.QUEUE_NAME,
    bodyLimitBytes: e.BODY_LIMIT_BYTES,
    queueCompression: e.QUEUE_COMPRESSION,
    batchMaxItems: e.BATCH_MAX_ITEMS,
    batchMaxInFlight: e.BATCH_MAX_IN_FLIGHT,
    enqueueTimeoutMs: e.ENQUEUE_TIMEOUT_MS,
    backlogMaxJobs: e.BACKLOG_MAX_JOBS,
    backlogPollMs: e.BACKLOG_POLL_MS,
    retryAfterSeconds: e.RETRY_AFTER_SECONDS,
    idempotencyTtlSeconds: e.IDEMPOTENCY_TTL_SECONDS,
    idempotencyPendingTtlSeconds: e.IDEMPOTENCY_PENDING_TTL_SECONDS,
    rateLimitPerMinute: e.RATE_LIMIT_PER_MINUTE,
    httpRequestTimeoutMs: e.HTTP_REQUEST_TIMEOUT_MS,
    httpHeadersTimeoutMs: e.HTTP_HEADERS_TIMEOUT_MS,
    httpKeepAliveTimeoutMs: e.HTTP_KEEP_ALIVE_TIMEOUT_MS,
    workerConcurrency: e.WORKER_CONCURRENCY,
    jobAttempts: e.JOB_ATTEMPTS,
    jobBackoffMs: e.JOB_BACKOFF_MS,
    jobLockMs: e.JOB_LOCK_MS,
    jobMaxStalled: e.JOB_MAX_STALLED,
    jobStalledIntervalMs: e.JOB_STALLED_INTERVAL_MS,
    keepCompletedJobs: e.KEEP_COMPLETED_JOBS,
    keepFailedJobs: e.KEEP_FAILED_JOBS,
    storeRetryMaxDelayMs: e.STORE_RETRY_MAX_DELAY_MS,
    mongodbTimeoutMs: e.MONGODB_TIMEOUT_MS,
    shutdownTimeoutMs: e.SHUTDOWN_TIMEOUT_MS,
    workerMetricsPort: e.WORKER_METRICS_PORT,
    logLevel: e.LOG_LEVEL,
  });
}

/** The variables {@link loadConfig} reads, for the README test and `--help`. */
export const CONFIG_VARIABLES: readonly string[] = Object.freeze(Object.keys(EnvSchema.entries));
