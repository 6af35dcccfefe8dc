import { createHash } from 'node:crypto';
import * as v from 'valibot';
import { JOB_COMPRESSIONS } from './job-payload.js';
import { ORDER_CLOCK_NODES } from './order-clock.js';
import { bool, int, MiB, oneOf, optionalInt, optionalText, text, url, type Setting } from './settings.js';

/** `open`: a dataset without a definition takes any fields and questions; `strict`: it is 404 `dataset_not_found`. */
export const DATASET_MODES = ['open', 'strict'] as const;

/** One configured API key. The secret itself is never kept: only its SHA-256 digest. */
export interface ApiKeyConfig {
  readonly name: string;
  /** SHA-256 of the secret, 32 bytes. */
  readonly digest: Buffer;
}

/** What an API key name may be (env keys and stored keys alike): it ends up as `api_key` and default `user_id`. */
export const KEY_NAME_RE = /^[A-Za-z0-9_.@-]{1,64}$/;
const SHA256_HEX_RE = /^[0-9a-fA-F]{64}$/;
/** Most shards `QUEUE_SHARDS` allows (also the layouts the worker looks through for stranded jobs, shared/stranded-shards.ts). */
export const QUEUE_SHARDS_MAX = 256;

/** Thrown by {@link loadConfig}; `message` is the one line printed before exit. */
export class ConfigError extends Error {
  readonly variable: string;
  constructor(variable: string, problem: string) {
    super(`invalid configuration: ${variable} ${problem}`);
    this.name = 'ConfigError';
    this.variable = variable;
  }
}

/**
 * Every setting of both processes, once, keyed by its {@link Config} property. The
 * configuration table of docs/configuration.md is generated from this (`npm run docs:config`), and a test fails when the
 * two differ.
 */
const SETTINGS = {
  port: int('PORT', { default: 3000, min: 0, max: 65535 }, 'API port; 0 picks a free one (tests).'),
  host: text('HOST', '0.0.0.0', 'API bind address: every interface by default, as platforms that set `PORT` need; `npm start` uses `127.0.0.1` unless set. The API refuses to start with the development key on a non-loopback address.', { type: 'address' }),
  webConcurrency: int('WEB_CONCURRENCY', { default: 1, min: 1, max: ORDER_CLOCK_NODES, unit: 'processes' }, 'API processes on this host sharing `PORT` (node:cluster: a primary forks them, replaces one that dies, forwards SIGTERM); 1 = a single process, no primary. See [Many processes on one host](scaling.md#many-processes-on-one-host).'),
  orderClockNode: optionalInt('ORDER_CLOCK_NODE', { min: 0, max: ORDER_CLOCK_NODES - 1 }, "The API process's node number in the acceptance order (`shared/order-clock.ts`), which breaks ties between processes minting in the same ms. Unset: random. With `WEB_CONCURRENCY` > 1 the primary gives its processes consecutive numbers from this one (or a random one), so that no two processes of a host share one."),
  redisUrl: url('REDIS_URL', 'redis://127.0.0.1:6379', ['redis:', 'rediss:'], 'Redis; `rediss://` for TLS.'),
  redisTlsUrl: url('REDIS_TLS_URL', undefined, ['rediss:'], 'Used instead of `REDIS_URL` when set (Heroku).'),
  redisClusterNodes: text('REDIS_CLUSTER_NODES', '', 'Comma-separated `host:port` of some nodes of a Redis Cluster (any masters or replicas; the rest are discovered). When set, `REDIS_URL` is not used (its scheme still decides TLS). See [Redis Cluster](scaling.md#redis-cluster).', { type: 'list' }),
  redisKeyPrefix: text('REDIS_KEY_PREFIX', '', 'Prepended, with a `:`, to every Redis key the service writes (queue, idempotency keys, rate-limit counters, webhook delivery leases), so that several deployments can share one Redis. Unset: the keys of earlier releases (`bull:<QUEUE_NAME>:…`, `feedback-ingest:<QUEUE_NAME>:…`).', { type: '1–64 of `[A-Za-z0-9_.-]`', pattern: [/^[A-Za-z0-9_.-]{0,64}$/, 'REDIS_KEY_PREFIX must be 1-64 of [A-Za-z0-9_.-]'] }),
  queueShards: int('QUEUE_SHARDS', { default: 0, min: 0, max: QUEUE_SHARDS_MAX, unit: 'shards' }, 'BullMQ queues the writes are spread over (by record id); the worker drains them all. 0 = 1 on one Redis, 6 on a Redis Cluster (each shard is one hash slot, so shards spread over masters). Change it only with an empty queue (see [Redis Cluster](scaling.md#redis-cluster)).'),
  redisMinReplicasAck: int('REDIS_MIN_REPLICAS_ACK', { default: 0, min: 0, max: 16, unit: 'replicas' }, 'Replicas that must confirm a job (Redis `WAIT`) before the API answers 200; fewer within `REDIS_REPLICA_ACK_TIMEOUT_MS` is 503 `queue_unavailable`. 0 = answer once the master has it. See [What a 200 promises](reliability.md#what-a-200-promises).'),
  redisReplicaAckTimeoutMs: int('REDIS_REPLICA_ACK_TIMEOUT_MS', { default: 500, min: 1, max: 60_000, unit: 'ms' }, '`WAIT` timeout of `REDIS_MIN_REPLICAS_ACK`; below `ENQUEUE_TIMEOUT_MS`.'),
  shardReroute: bool('SHARD_REROUTE', true, 'Route writes around a queue shard whose Redis master stops answering (a failover, `CLUSTERDOWN`, `WAIT` short of `REDIS_MIN_REPLICAS_ACK`): new records get an id on a shard that answers, responses go to any such shard, writes waiting for the failing shard move; the shard is probed every `SHARD_PROBE_MS` and used again once it answers. `false`: every write goes to its record\'s shard. See [Redis Cluster](scaling.md#redis-cluster).'),
  shardProbeMs: int('SHARD_PROBE_MS', { default: 500, min: 50, max: 60_000, unit: 'ms' }, 'Pause between two probes of a queue shard that stopped answering (`SHARD_REROUTE`).'),
  redisTlsRejectUnauthorized: bool('REDIS_TLS_REJECT_UNAUTHORIZED', true, "Verify the Redis TLS certificate; `false` for Heroku Redis's self-signed one."),
  mongodbUri: url('MONGODB_URI', 'mongodb://127.0.0.1:27017/feedback', ['mongodb:', 'mongodb+srv:'], 'MongoDB; the path names the database (default `feedback`).'),
  mongodbWriteConcern: oneOf('MONGODB_WRITE_CONCERN', ['server', '1', 'majority'], 'server', "Write concern `w` of the worker's writes (a job completes only once they are acknowledged so): `server` leaves it to `MONGODB_URI` or the server's default (`majority` on a replica set since MongoDB 5.0, `1` standalone); `majority` survives the loss of the primary. See [Production layout](scaling.md#production-layout)."),
  mongodbJournal: bool('MONGODB_JOURNAL', false, '`true` asks for journaled writes (`j: true`: on disk before acknowledged); `false` leaves it to the server (MongoDB journals `w: majority` writes by default).'),
  mongodbReadPreference: oneOf('MONGODB_READ_PREFERENCE', ['primary', 'primaryPreferred', 'secondary', 'secondaryPreferred', 'nearest'], 'primary', "Read preference of reads that tolerate lag (stored API keys, dead-letter listings); reads the order depends on (the worker's record lookups, the order floor) always go to the primary."),
  mongodbTimeoutMs: int('MONGODB_TIMEOUT_MS', { default: 5_000, min: 100, max: 600_000, unit: 'ms' }, "The MongoDB driver's server selection and connect timeout; its sockets time out after 6× this (at least 30 s)."),
  apiKeys: text('API_KEYS', '', 'Comma-separated `name:secret` or `name:sha256:<hex digest of the secret>`; the name is the default `user_id`. Never logged.', { type: 'list' }),
  adminApiKeyNames: text('ADMIN_API_KEY_NAMES', '', 'Comma-separated names from `API_KEYS` whose keys carry the admin scope (`/admin/...`). Stored keys get it with `npm run keys -- create --admin`.', { type: 'list' }),
  readApiKeyNames: text('READ_API_KEY_NAMES', '', 'Comma-separated names from `API_KEYS` whose keys may read their datasets (`GET /feedback-record/…`, `/datasets/…`); the others are write-only. Admin keys read every dataset. Stored keys get it with `npm run keys -- create --read`.', { type: 'list' }),
  apiKeysRefreshMs: int('API_KEYS_REFRESH_MS', { default: 5000, min: 50, max: 3_600_000, unit: 'ms' }, 'How often each API process reloads the keys stored in MongoDB; a new or revoked key takes effect within this.'),
  datasets: oneOf('DATASETS', DATASET_MODES, 'open', 'A write to a dataset without a definition: `open` takes any fields and questions (key-name rules only), `strict` answers 404 `dataset_not_found`. See [Datasets](datasets/README.md).'),
  datasetsRefreshMs: int('DATASETS_REFRESH_MS', { default: 5000, min: 50, max: 3_600_000, unit: 'ms' }, 'How often each API process reloads the dataset definitions: a new or changed definition applies to the writes of every API process within this (at once in the process that served the `PUT`). The worker reads completion rules with each store round, so it has no period.'),
  idSigningSecrets: optionalText('ID_SIGNING_SECRETS', 'Comma-separated HMAC secrets for record ids and, through HKDF, the key of browser feedback tokens (≥ 16 chars; the first signs, all verify). Unset: a development secret. Required when `NODE_ENV=production`; the same for every API process.', 'list'),
  feedbackTokenTtlSeconds: int('FEEDBACK_TOKEN_TTL_SECONDS', { default: 900, min: 10, max: 7 * 86_400, unit: 's' }, 'Lifetime of a browser feedback token when `POST /feedback-tokens` asks for none; at most `FEEDBACK_TOKEN_MAX_TTL_SECONDS`. See [Feedback from the browser](client.md#feedback-from-the-browser).'),
  feedbackTokenMaxTtlSeconds: int('FEEDBACK_TOKEN_MAX_TTL_SECONDS', { default: 3600, min: 10, max: 7 * 86_400, unit: 's' }, 'Longest lifetime a feedback token may be given (`expires_in_seconds` above it is 400); tokens older than this are refused even if minted under a higher maximum.'),
  corsOrigins: text('CORS_ORIGINS', '', 'Comma-separated origins (`https://chat.example.com`, no path) whose pages may call `POST /feedback-response` from a browser (CORS); unset = none. Only that route answers CORS.', { type: 'list' }),
  nodeEnv: text('NODE_ENV', 'development', '`production` makes `ID_SIGNING_SECRETS` mandatory.'),
  queueName: text('QUEUE_NAME', 'feedback-writes', 'BullMQ queue name.', { type: '1–100 of `[A-Za-z0-9_-]`', pattern: [/^[A-Za-z0-9_-]{1,100}$/, 'QUEUE_NAME must be 1-100 of [A-Za-z0-9_-]'] }),
  bodyLimitBytes: int('BODY_LIMIT_BYTES', { default: MiB, min: 1024, max: 64 * MiB, unit: 'bytes' }, 'Largest accepted body of a single write, and of each item of `POST /feedback-batch`; larger is 413. Above about 2 MiB a write of many small numbers can be larger than 16 MiB as a stored (BSON) document, which the worker then dead-letters: raise it with care.'),
  batchRequestMaxItems: int('BATCH_REQUEST_MAX_ITEMS', { default: 500, min: 1, max: 10_000, unit: 'items' }, 'Most items one `POST /feedback-batch` call may hold; more is 400 `validation_failed`. See [Batch](api.md#batch).'),
  batchRequestMaxBytes: int('BATCH_REQUEST_MAX_BYTES', { default: 16 * MiB, min: 1024, max: 256 * MiB, unit: 'bytes' }, 'Largest accepted body of `POST /feedback-batch` (instead of `BODY_LIMIT_BYTES`); larger is 413.'),
  queueCompression: oneOf('QUEUE_COMPRESSION', JOB_COMPRESSIONS, 'deflate', "How a job's writes are packed for Redis: `deflate`, or `none` (plain JSON, readable in Redis tools)."),
  batchMaxItems: int('BATCH_MAX_ITEMS', { default: 200, min: 1, max: 4000, unit: 'writes' }, 'Most writes one queued job carries.'),
  batchMaxBytes: int('BATCH_MAX_BYTES', { default: 4 * MiB, min: 1024, max: 256 * MiB, unit: 'bytes' }, "A job closes once its writes' bodies reach this; a larger single write travels alone."),
  batchMaxInFlight: int('BATCH_MAX_IN_FLIGHT', { default: 4, min: 1, max: 64, unit: 'jobs' }, 'Jobs being added at once per API process; more requests wait and join the next job.'),
  enqueueTimeoutMs: int('ENQUEUE_TIMEOUT_MS', { default: 1000, min: 10, max: 60_000, unit: 'ms' }, "Longest wait for Redis's acknowledgement of a job before 503 `queue_unavailable`. A write waiting behind others for a job (a large batch call) waits as long as Redis keeps acknowledging jobs, and fails when none was acknowledged for this long."),
  enqueueMaxPendingWrites: int('ENQUEUE_MAX_PENDING_WRITES', { default: 20_000, min: 1, max: 10_000_000, unit: 'writes' }, 'Writes waiting in one API process for a job; above it new writes get 503 `overloaded`.'),
  enqueueMaxPendingBytes: int('ENQUEUE_MAX_PENDING_BYTES', { default: 64 * MiB, min: 1024, max: 4 * 1024 * MiB, unit: 'bytes' }, 'Body bytes waiting in one API process for a job; above it new writes get 503 `overloaded`.'),
  backlogMaxJobs: int('BACKLOG_MAX_JOBS', { default: 20_000, min: 1, max: 100_000_000, unit: 'jobs' }, 'Waiting + delayed + prioritized jobs above which writes get 503 `overloaded`.'),
  backlogPollMs: int('BACKLOG_POLL_MS', { default: 500, min: 10, max: 60_000, unit: 'ms' }, 'How often each API process reads the backlog.'),
  retryAfterSeconds: int('RETRY_AFTER_SECONDS', { default: 1, min: 1, max: 3600, unit: 's' }, '`Retry-After` of 503 `queue_unavailable` (×5 for `overloaded`).'),
  idempotencyTtlSeconds: int('IDEMPOTENCY_TTL_SECONDS', { default: 86_400, min: 1, max: 30 * 86_400, unit: 's' }, 'How long an `Idempotency-Key` is remembered.'),
  idempotencyPendingTtlSeconds: int('IDEMPOTENCY_PENDING_TTL_SECONDS', { default: 60, min: 1, max: 3600, unit: 's' }, 'How long a key stays claimed by a request that never finished.'),
  rateLimitPerMinute: int('RATE_LIMIT_PER_MINUTE', { default: 0, min: 0, max: 10_000_000, unit: 'requests/min' }, "Write requests per API key per minute, shared by all API processes (counted in Redis); 0 = no limit. A stored key's own `rate_limit_per_minute` wins. See [Rate limits](api.md#rate-limits)."),
  httpRequestTimeoutMs: int('HTTP_REQUEST_TIMEOUT_MS', { default: 30_000, min: 100, max: 600_000, unit: 'ms' }, 'Whole-request timeout (408 after it).'),
  httpHeadersTimeoutMs: int('HTTP_HEADERS_TIMEOUT_MS', { default: 10_000, min: 100, max: 600_000, unit: 'ms' }, 'Headers must arrive within this; at most `HTTP_REQUEST_TIMEOUT_MS`.'),
  httpKeepAliveTimeoutMs: int('HTTP_KEEP_ALIVE_TIMEOUT_MS', { default: 5_000, min: 100, max: 600_000, unit: 'ms' }, 'Idle keep-alive connections are closed after this.'),
  workerConcurrency: int('WORKER_CONCURRENCY', { default: 256, min: 1, max: 1000, unit: 'jobs' }, 'Most jobs one worker process holds at once (over all shards); the writes of the jobs in hand are merged into one store round trip (one `insertMany` per collection). The worker holds fewer when jobs are large: see `WORKER_WRITES_IN_HAND`.'),
  responseHistoryMax: int('RESPONSE_HISTORY_MAX', { default: 20, min: 0, max: 1000, unit: 'versions' }, 'Earlier versions kept per response for `GET /feedback-record/{id}/history`, in the response document; the oldest are dropped first; 0 keeps none. Keep (this + 2) times the largest `values` under the 16 MiB document limit (the stored version is also the last entry of the history). See [History](annotation.md#history).'),
  workerWritesInHand: int('WORKER_WRITES_IN_HAND', { default: 4000, min: 1, max: 1_000_000, unit: 'writes' }, 'Writes one worker process aims to hold: it takes as many jobs as that needs at their average size (at least one per shard, at most `WORKER_CONCURRENCY`). The API\'s jobs hold a few writes each at moderate load, so a store round needs many of them: with jobs of 3 writes the drain reached 0.55× of the store\'s plain operations holding 16 jobs, 0.80× holding 256 (docs/performance.md); large jobs need few.'),
  jobAttempts: int('JOB_ATTEMPTS', { default: 8, min: 1, max: 1000, unit: 'attempts' }, 'Attempts per job for non-transient failures (a response whose record is not stored yet). Set on `web` (and where dead letters are retried): it travels with each job as it is added, so the worker\'s value does nothing.'),
  jobBackoffMs: int('JOB_BACKOFF_MS', { default: 1000, min: 1, max: 3_600_000, unit: 'ms' }, 'Base of the exponential backoff between attempts. Read where jobs are added (`web`, the dead-letter retry), like `JOB_ATTEMPTS`.'),
  jobLockMs: int('JOB_LOCK_MS', { default: 30_000, min: 1000, max: 3_600_000, unit: 'ms' }, "BullMQ's lock on a job; a dead worker's job is taken up again after it."),
  jobStalledIntervalMs: int('JOB_STALLED_INTERVAL_MS', { default: 30_000, min: 1000, max: 3_600_000, unit: 'ms' }, 'How often a worker looks for jobs held by a dead worker (BullMQ `stalledInterval`); such a job runs again after one to two intervals.'),
  workerStuckMs: int('WORKER_STUCK_MS', { default: 30_000, min: 0, max: 3_600_000, unit: 'ms' }, "A shard's BullMQ worker that has taken no job for this long while jobs wait for it, with none in hand and the queue not paused, is replaced by a new one (it was seen parked after a Redis Cluster failover); 0 turns the check off."),
  jobMaxStalled: int('JOB_MAX_STALLED', { default: 10, min: 0, max: 1000, unit: 'stalls' }, 'Stalls before a job is failed (its writes are then dead-lettered as `job_failed`).'),
  keepCompletedJobs: int('KEEP_COMPLETED_JOBS', { default: 1000, min: 0, max: 10_000_000, unit: 'jobs' }, 'Completed jobs kept in Redis (also at most one hour). Read where jobs are added (`web`), like `JOB_ATTEMPTS`.'),
  keepFailedJobs: int('KEEP_FAILED_JOBS', { default: 10_000, min: 0, max: 10_000_000, unit: 'jobs' }, 'Failed jobs kept in Redis (also at most seven days). Read where jobs are added (`web`), like `JOB_ATTEMPTS`.'),
  erasureSettleMs: int('ERASURE_SETTLE_MS', { default: 10_000, min: 0, max: 3_600_000, unit: 'ms' }, 'How long an erasure waits after its first sweep before the last one and `done`: longer than a store round of any worker process lasts (docs/erasure.md).'),
  storeRetryMaxDelayMs: int('STORE_RETRY_MAX_DELAY_MS', { default: 10_000, min: 10, max: 3_600_000, unit: 'ms' }, 'Cap of the delay between retries while MongoDB is unreachable; these retries use no attempt.'),
  shutdownTimeoutMs: int('SHUTDOWN_TIMEOUT_MS', { default: 10_000, min: 100, max: 600_000, unit: 'ms' }, 'Longest graceful shutdown before the process exits anyway.'),
  workerMetricsPort: int('WORKER_METRICS_PORT', { default: 0, min: 0, max: 65535 }, "Port of the worker's `/metrics`; 0 = off."),
  webhooksAllowInsecure: bool('WEBHOOKS_ALLOW_INSECURE', false, 'Webhook endpoints may be `http://` and resolve to loopback, link-local or private addresses. Local development and tests only: otherwise only `https://` to public addresses (checked on the address resolved at each delivery). See [Webhooks](webhooks.md).'),
  webhookTimeoutMs: int('WEBHOOK_TIMEOUT_MS', { default: 10_000, min: 100, max: 120_000, unit: 'ms' }, 'Longest a webhook delivery attempt may take (connect, send, answer); slower is a failed attempt.'),
  webhookMaxAttempts: int('WEBHOOK_MAX_ATTEMPTS', { default: 20, min: 1, max: 1000, unit: 'attempts' }, 'Attempts per webhook delivery before it is `failed` (visible and replayable). With the default backoff, 20 attempts span about 5 to 10 hours (jitter).'),
  webhookBackoffMs: int('WEBHOOK_BACKOFF_MS', { default: 5_000, min: 10, max: 3_600_000, unit: 'ms' }, 'Delay before the second attempt of a delivery; it doubles per attempt up to `WEBHOOK_BACKOFF_MAX_MS`, each delay drawn between half and all of it (jitter).'),
  webhookBackoffMaxMs: int('WEBHOOK_BACKOFF_MAX_MS', { default: 3_600_000, min: 10, max: 86_400_000, unit: 'ms' }, 'Longest delay between two attempts of a delivery.'),
  webhookMaxInFlight: int('WEBHOOK_MAX_IN_FLIGHT', { default: 400, min: 1, max: 10_000, unit: 'jobs' }, 'Deliveries per endpoint held in Redis at once (one per record at most, each with its record\'s lease; none for the first `WEBHOOK_BURST_YIELD_MS` of a backlog of writes, at most 50 after that until it is gone); the rest wait in MongoDB (`webhook_batches`, `webhook_outbox`). Bounds Redis at endpoints × this deliveries (in jobs of up to 16) and as many leases, whatever an endpoint\'s downtime.'),
  webhookConcurrency: int('WEBHOOK_CONCURRENCY', { default: 8, min: 1, max: 1000, unit: 'jobs' }, 'Webhook deliveries one worker process sends at once.'),
  webhookRefreshMs: int('WEBHOOK_REFRESH_MS', { default: 5_000, min: 50, max: 3_600_000, unit: 'ms' }, 'How often each worker process reloads the webhook endpoints; a new or deleted endpoint takes effect within this.'),
  webhookBurstYieldMs: int('WEBHOOK_BURST_YIELD_MS', { default: 10_000, min: 0, max: 600_000, unit: 'ms' }, 'While the worker works through a backlog of writes (a burst), it queues no new webhook deliveries for up to this long, so that the burst drains at the rate it would without webhooks; after it, deliveries take a bounded share (50 in flight per endpoint) until the backlog is gone, then the full `WEBHOOK_MAX_IN_FLIGHT`. Events wait in MongoDB meanwhile. 0: no pause, only the bounded share. See [Webhooks](webhooks.md#speed).'),
  webhookDispatchMs: int('WEBHOOK_DISPATCH_MS', { default: 500, min: 10, max: 60_000, unit: 'ms' }, 'How often the worker moves waiting deliveries from the outbox to the delivery queue (also at once after a store round that added some).'),
  webhookKeepDeliveredS: int('WEBHOOK_KEEP_DELIVERED_S', { default: 86_400, min: 0, max: 90 * 86_400, unit: 's' }, 'How long delivered events stay in the outbox (for `GET /admin/webhooks/{id}/deliveries`).'),
  logLevel: oneOf('LOG_LEVEL', ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], 'info', 'pino level.'),
};

/** Settings whose {@link Config} value {@link loadConfig} computes (from them and others) instead of copying. */
const DERIVED = ['redisUrl', 'redisTlsUrl', 'redisClusterNodes', 'queueShards', 'apiKeys', 'adminApiKeyNames', 'readApiKeyNames', 'idSigningSecrets', 'corsOrigins'] as const;

/** Shards of the write queue when `QUEUE_SHARDS` is 0, on a Redis Cluster: a few per master of a 3-master cluster. */
export const DEFAULT_CLUSTER_SHARDS = 6;

type Settings = typeof SETTINGS;
type Parsed = { readonly [K in keyof Settings]: Settings[K] extends Setting<infer T> ? T : never };

/** The validated, frozen configuration of both processes. Units are in the names; each setting's unit, default and meaning are in {@link SETTINGS}. */
export type Config = Omit<Parsed, (typeof DERIVED)[number]> & {
  /** `REDIS_TLS_URL` when set (Heroku), else `REDIS_URL`. */
  readonly redisUrl: string;
  /** Nodes of the Redis Cluster (`REDIS_CLUSTER_NODES`); empty on a single Redis. */
  readonly redisClusterNodes: readonly { readonly host: string; readonly port: number }[];
  /** Queues the writes are spread over (`QUEUE_SHARDS`, 0 resolved). */
  readonly queueShards: number;
  /** Database name: the path of `MONGODB_URI`, default `feedback`. */
  readonly mongodbDatabase: string;
  readonly apiKeys: readonly ApiKeyConfig[];
  /** Names from `API_KEYS` that carry the admin scope (admin endpoints). */
  readonly adminApiKeyNames: readonly string[];
  /** Names from `API_KEYS` that carry the read scope. */
  readonly readApiKeyNames: readonly string[];
  /** HMAC secrets for record ids; the first signs, all verify (rotation). */
  readonly idSigningSecrets: readonly string[];
  /** True when no ID_SIGNING_SECRETS was given and the development secret is in use. */
  readonly idSigningSecretIsDefault: boolean;
  /** Browser origins (`scheme://host[:port]`) allowed to call `POST /feedback-response` (CORS); empty = none. */
  readonly corsOrigins: readonly string[];
};

/** The settings in the order of the generated table (docs/configuration.md). */
export const CONFIG_SETTINGS: readonly Setting[] = Object.freeze(Object.values(SETTINGS));

const ParsedSchema = v.object(Object.fromEntries(Object.entries(SETTINGS).map(([key, s]) => [key, s.schema])));

const DEV_ID_SECRET = 'feedback-ingest-development-id-secret';

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

const commaList = (raw: string) => raw.split(',').map((s) => s.trim()).filter((s) => s.length > 0);

/**
 * Origins exactly as a browser sends them in `Origin` (scheme, host, port; no path, no trailing
 * slash), since they are compared as strings. `*` is refused: the contract says configured
 * origins only.
 */
function parseCorsOrigins(raw: string): string[] {
  const origins = commaList(raw);
  for (const origin of origins) {
    let parsed: URL | undefined;
    try {
      parsed = new URL(origin);
    } catch {
      parsed = undefined;
    }
    if (parsed === undefined || !['http:', 'https:'].includes(parsed.protocol) || parsed.origin !== origin) {
      throw new ConfigError('CORS_ORIGINS', `has "${origin}", which is not an origin like https://chat.example.com (scheme, host, optional port; no path or trailing slash)`);
    }
  }
  return origins;
}

/** Validates the environment once. Throws {@link ConfigError} naming the first bad variable. */
export function loadConfig(env: Readonly<Record<string, string | undefined>>): Config {
  const input: Record<string, string> = {};
  for (const [key, setting] of Object.entries(SETTINGS)) {
    const value = env[setting.env];
    if (value !== undefined && value !== '') input[key] = value;
  }
  const result = v.safeParse(ParsedSchema, input);
  if (!result.success) {
    const issue = result.issues[0];
    const key = issue.path?.[0]?.key;
    const name = typeof key === 'string' && key in SETTINGS ? SETTINGS[key as keyof Settings].env : 'environment';
    const msg = issue.message.startsWith(name) ? issue.message.slice(name.length + 1) : `is invalid: ${issue.message}`;
    throw new ConfigError(name, msg);
  }
  const e = result.output as Parsed;
  const mongoPath = new URL(e.mongodbUri).pathname.replace(/^\//, '');
  const mongodbDatabase = mongoPath === '' ? 'feedback' : decodeURIComponent(mongoPath);
  if (!/^[A-Za-z0-9_-]{1,63}$/.test(mongodbDatabase)) {
    throw new ConfigError('MONGODB_URI', 'must name a database of 1-63 of [A-Za-z0-9_-]');
  }
  const secrets = commaList(e.idSigningSecrets ?? '');
  if (secrets.some((s) => s.length < 16)) throw new ConfigError('ID_SIGNING_SECRETS', 'must hold secrets of at least 16 characters');
  if (secrets.length === 0 && e.nodeEnv === 'production') {
    throw new ConfigError('ID_SIGNING_SECRETS', 'is required when NODE_ENV=production (a random string of 32+ characters, the same for every API process)');
  }
  const apiKeys = parseApiKeys(e.apiKeys);
  const keyNames = (variable: string, raw: string): string[] => {
    const names = commaList(raw);
    for (const name of names) {
      if (!apiKeys.some((k) => k.name === name)) throw new ConfigError(variable, `names "${name}", which is not a key of API_KEYS`);
    }
    return names;
  };
  const adminApiKeyNames = keyNames('ADMIN_API_KEY_NAMES', e.adminApiKeyNames);
  const readApiKeyNames = keyNames('READ_API_KEY_NAMES', e.readApiKeyNames);
  if (e.feedbackTokenTtlSeconds > e.feedbackTokenMaxTtlSeconds) {
    throw new ConfigError('FEEDBACK_TOKEN_TTL_SECONDS', 'must not exceed FEEDBACK_TOKEN_MAX_TTL_SECONDS');
  }
  const corsOrigins = parseCorsOrigins(e.corsOrigins);
  if (e.httpHeadersTimeoutMs > e.httpRequestTimeoutMs) {
    throw new ConfigError('HTTP_HEADERS_TIMEOUT_MS', 'must not exceed HTTP_REQUEST_TIMEOUT_MS');
  }
  if (e.redisMinReplicasAck > 0 && e.redisReplicaAckTimeoutMs >= e.enqueueTimeoutMs) {
    throw new ConfigError('REDIS_REPLICA_ACK_TIMEOUT_MS', 'must be below ENQUEUE_TIMEOUT_MS (the WAIT runs within the enqueue deadline)');
  }
  if (e.workerStuckMs > 0 && e.workerStuckMs < 1000) {
    throw new ConfigError('WORKER_STUCK_MS', 'must be 0 (off) or at least 1000');
  }
  const redisClusterNodes = commaList(e.redisClusterNodes).map((entry) => {
    const m = /^([A-Za-z0-9.-]+|\[[0-9A-Fa-f:]+\]):(\d{1,5})$/.exec(entry);
    const port = Number(m?.[2]);
    if (m === null || port < 1 || port > 65535) throw new ConfigError('REDIS_CLUSTER_NODES', `must be comma-separated host:port, got "${entry}"`);
    return Object.freeze({ host: m[1]!.replace(/^\[|\]$/g, ''), port });
  });
  const queueShards = e.queueShards > 0 ? e.queueShards : redisClusterNodes.length > 0 ? DEFAULT_CLUSTER_SHARDS : 1;
  const direct = Object.fromEntries(Object.entries(e).filter(([key]) => !(DERIVED as readonly string[]).includes(key)));
  return Object.freeze({
    ...(direct as Omit<Parsed, (typeof DERIVED)[number]>),
    redisUrl: e.redisTlsUrl ?? e.redisUrl,
    redisClusterNodes: Object.freeze(redisClusterNodes),
    queueShards,
    mongodbDatabase,
    apiKeys: Object.freeze(apiKeys),
    adminApiKeyNames: Object.freeze(adminApiKeyNames),
    readApiKeyNames: Object.freeze(readApiKeyNames),
    idSigningSecrets: Object.freeze(secrets.length > 0 ? secrets : [DEV_ID_SECRET]),
    idSigningSecretIsDefault: secrets.length === 0,
    corsOrigins: Object.freeze(corsOrigins),
  });
}

/** The variables {@link loadConfig} reads, for `--help` and tests. */
export const CONFIG_VARIABLES: readonly string[] = Object.freeze(CONFIG_SETTINGS.map((s) => s.env));
