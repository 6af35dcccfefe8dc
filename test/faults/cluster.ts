import { randomBytes } from 'node:crypto';
import { Queue } from 'bullmq';
import { Cluster as RedisCluster, Redis } from 'ioredis';
import { MongoClient, type Db } from 'mongodb';
import { COLLECTIONS, mongoClientOptions } from '../../shared/mongo.js';
import { loadConfig } from '../../shared/config.js';
import { createWriteQueues, type WriteQueues } from '../../shared/queue.js';
import { startRedisCluster, type RedisClusterHandle } from '../helpers/redis-cluster.js';
import { freePort, startFerretDb, startRedis, type ManagedServer } from '../../devkit/servers.js';
import { msg, saveLogs, spawnService, type ServiceProcess } from '../../devkit/processes.js';

export const LEDGER_KEY = { name: 'ledger', secret: 'ledger-secret-key-7f3a9c2e51d84b06' } as const;
const OTHER_LEDGER_KEY = { name: 'ledger-2', secret: 'ledger-second-key-0c8e1b7a94d2f365' } as const;
export const ID_SECRET = 'faults-id-signing-secret-5a1e9d03c7b24f86';

/** Polls `check` until it returns something other than undefined; fails after `timeoutMs`. */
export async function until<T>(check: () => Promise<T | undefined> | T | undefined, timeoutMs: number, what: string, everyMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

interface ClusterOptions {
  /** Label used for artifacts (logs). */
  readonly label: string;
  readonly redisPolicy?: string;
  /** Variables every process gets on top of the defaults below. */
  readonly env?: Readonly<Record<string, string>>;
  /** A Redis Cluster (3 masters + 3 replicas) instead of one Redis. */
  readonly redisCluster?: boolean;
}

/**
 * One scenario's world: its own durable Redis and store, any number of API and worker child
 * processes, and the test's own view of the queue and the database. `close()` kills everything,
 * even after a failure, and keeps the processes' logs under test-artifacts/.
 */
export class Cluster {
  readonly label: string;
  readonly queueName: string;
  readonly dbName: string;
  /** The one Redis (unless `redisCluster`). */
  redis!: ManagedServer;
  /** The Redis Cluster (with `redisCluster`). */
  redisNodes: RedisClusterHandle | undefined;
  mongo!: ManagedServer;
  readonly procs: ServiceProcess[] = [];
  private readonly extraEnv: Readonly<Record<string, string>>;
  private readonly redisPolicy: string | undefined;
  private mongoClient: MongoClient | undefined;
  private observer: Redis | undefined;
  private observerQueue: Queue | undefined;
  private readonly onCluster: boolean;
  private clusterObserver: RedisCluster | undefined;
  private observerQueues: WriteQueues | undefined;

  constructor(options: ClusterOptions) {
    this.label = options.label;
    const id = randomBytes(4).toString('hex');
    this.queueName = `faults-${id}`;
    this.dbName = `faults_${id}`;
    this.extraEnv = options.env ?? {};
    this.redisPolicy = options.redisPolicy;
    this.onCluster = options.redisCluster === true;
  }

  async start(): Promise<this> {
    if (this.onCluster) {
      const [nodes, mongo] = await Promise.all([startRedisCluster(), startFerretDb()]);
      this.redisNodes = nodes;
      this.mongo = mongo;
      return this;
    }
    const [redis, mongo] = await Promise.all([
      startRedis({ durable: true, ...(this.redisPolicy === undefined ? {} : { maxmemoryPolicy: this.redisPolicy }) }),
      startFerretDb(),
    ]);
    this.redis = redis;
    this.mongo = mongo;
    return this;
  }

  /** The environment of a `web` or `worker` process of this cluster. */
  env(overrides: Readonly<Record<string, string>> = {}): Record<string, string> {
    return {
      NODE_ENV: 'test',
      HOST: '127.0.0.1',
      PORT: '0',
      ...(this.redisNodes === undefined ? { REDIS_URL: this.redis.url } : { REDIS_CLUSTER_NODES: this.redisNodes.nodesSetting }),
      MONGODB_URI: `${this.mongo.url}/${this.dbName}`,
      QUEUE_NAME: this.queueName,
      API_KEYS: `${LEDGER_KEY.name}:${LEDGER_KEY.secret},${OTHER_LEDGER_KEY.name}:${OTHER_LEDGER_KEY.secret}`,
      ID_SIGNING_SECRETS: ID_SECRET,
      LOG_LEVEL: 'info',
      BACKLOG_POLL_MS: '200',
      // Small lock and stalled-check interval: a job held by a killed worker runs again in ~4 s.
      JOB_LOCK_MS: '2000',
      JOB_STALLED_INTERVAL_MS: '2000',
      MONGODB_TIMEOUT_MS: '1500',
      STORE_RETRY_MAX_DELAY_MS: '1000',
      SHUTDOWN_TIMEOUT_MS: '8000',
      // Every completed job stays inspectable during the scenario.
      KEEP_COMPLETED_JOBS: '1000000',
      ...this.extraEnv,
      ...overrides,
    };
  }

  /** Starts an API process on `port` (a free one by default) and waits until it listens. */
  async startApi(overrides: Readonly<Record<string, string>> = {}, port?: number): Promise<ServiceProcess & { readonly url: string; readonly port: number }> {
    const p = port ?? (await freePort());
    const proc = spawnService('api', 'api/main.ts', this.env({ ...overrides, PORT: String(p) }));
    this.procs.push(proc);
    await proc.waitForLog(msg('api listening'), 60_000, 'api listening');
    return Object.assign(proc, { url: `http://127.0.0.1:${p}`, port: p });
  }

  /** Starts a worker process and waits until it takes jobs. */
  async startWorker(overrides: Readonly<Record<string, string>> = {}): Promise<ServiceProcess> {
    const proc = spawnService('worker', 'worker/main.ts', this.env(overrides));
    this.procs.push(proc);
    await proc.waitForLog(msg('worker started'), 30_000, 'worker started');
    return proc;
  }

  /** The scenario's database, read by the test (never by the service). */
  db(): Db {
    this.mongoClient ??= new MongoClient(`${this.mongo.url}/${this.dbName}`, { ...mongoClientOptions(), serverSelectionTimeoutMS: 5_000, retryWrites: false });
    return this.mongoClient.db(this.dbName);
  }

  async deadLetters(): Promise<Record<string, any>[]> {
    return this.db().collection(COLLECTIONS.deadLetters).find({}).toArray();
  }

  /** The test's own Redis connection (waits through outages: use it while Redis is up). */
  redisClient(): Redis {
    if (this.observer === undefined) {
      this.observer = new Redis(this.redis.url, { maxRetriesPerRequest: null, retryStrategy: () => 200 });
      this.observer.on('error', () => undefined);
    }
    return this.observer;
  }

  /** The test's own view of the queue (only used while Redis is up). */
  queue(): Queue {
    this.observerQueue ??= new Queue(this.queueName, { connection: this.redisClient() });
    return this.observerQueue;
  }

  /** Redis key of the queue's `part` (BullMQ's default `bull` prefix). */
  key(part: string): string {
    return `bull:${this.queueName}:${part}`;
  }

  /**
   * The test's own view of every shard of the write queue, on one Redis or on the cluster (a
   * client that waits through failovers: use it while the cluster serves every slot).
   */
  queues(): WriteQueues {
    if (this.observerQueues === undefined) {
      const config = loadConfig(this.env());
      if (this.redisNodes === undefined) {
        this.observerQueues = createWriteQueues(config, this.redisClient());
      } else {
        this.clusterObserver = new RedisCluster(config.redisClusterNodes.map((n) => ({ ...n })), { redisOptions: { maxRetriesPerRequest: null }, clusterRetryStrategy: () => 200 });
        this.clusterObserver.on('error', () => undefined);
        this.observerQueues = createWriteQueues(config, this.clusterObserver);
      }
    }
    return this.observerQueues;
  }

  /** The test's own cluster client (with `redisCluster`; waits through failovers). */
  clusterClient(): RedisCluster {
    this.queues();
    if (this.clusterObserver === undefined) throw new Error('not on a Redis Cluster');
    return this.clusterObserver;
  }

  /** Jobs not finished yet, over every shard: waiting, active, delayed, prioritized. */
  async pendingJobs(): Promise<number> {
    return this.queues().count('waiting', 'active', 'delayed', 'prioritized', 'waiting-children');
  }

  async failedJobs(): Promise<number> {
    return this.queues().count('failed');
  }

  /** Kills every process still running, closes the test's connections, removes the services. */
  async close(): Promise<void> {
    await Promise.all(this.procs.map((p) => p.kill()));
    saveLogs(this.label, this.procs);
    // Redis may be down if the test failed mid-outage: disconnect without waiting for it. The
    // queue only borrows that connection, so closing it after needs no Redis either.
    this.observer?.disconnect();
    this.clusterObserver?.disconnect();
    await this.observerQueue?.close();
    await this.observerQueues?.close().catch(() => undefined);
    await this.mongoClient?.close().catch(() => undefined);
    await Promise.all([this.redis?.destroy(), this.redisNodes?.destroy(), this.mongo?.destroy()]);
  }
}
