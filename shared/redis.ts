import { Cluster, Redis, type RedisOptions } from 'ioredis';
import type { Config } from './config.js';
import type { Logger } from './logger.js';

/**
 * `producer`: the API. Commands fail at once while Redis is down (no offline queue), so the API
 * answers 503 instead of holding requests. `worker`: retries forever, as BullMQ workers require.
 */
type RedisRole = 'producer' | 'worker';

/** A connection to one Redis, or to a Redis Cluster (`REDIS_CLUSTER_NODES`): BullMQ and every caller take both. */
export type RedisClient = Redis | Cluster;

type RedisConfig = Pick<Config, 'redisUrl' | 'redisClusterNodes' | 'redisTlsRejectUnauthorized' | 'enqueueTimeoutMs'>;

function redisOptions(config: RedisConfig, role: RedisRole): Omit<RedisOptions, 'replyMapping'> {
  const tls = config.redisUrl.startsWith('rediss:') ? { tls: { rejectUnauthorized: config.redisTlsRejectUnauthorized } } : {};
  return {
    ...tls,
    connectTimeout: 2_000,
    // Reconnect forever, backing off to 2 s: recovery after a Redis restart needs no process restart.
    retryStrategy: (times: number) => Math.min(100 * times, 2_000),
    ...(role === 'producer'
      ? // A command Redis does not answer within the enqueue timeout fails (the API answers 503).
        { enableOfflineQueue: false, maxRetriesPerRequest: 1, commandTimeout: config.enqueueTimeoutMs }
      : { enableOfflineQueue: true, maxRetriesPerRequest: null }),
  };
}

/**
 * A Redis Cluster client with the role's behaviour on every node connection. The producer's
 * commands fail at once while the cluster client is not ready (no offline queue); ioredis always
 * queues on a node connection that is reconnecting, so there `commandTimeout` bounds them: a
 * failover shows as 503s, never as hanging requests. A moved slot (the replica promoted) is
 * followed by ioredis after a fresh read of the slot map.
 */
function createCluster(config: RedisConfig, role: RedisRole, options: Pick<RedisOptions, 'commandTimeout'>): Cluster {
  const { retryStrategy, enableOfflineQueue, ...nodeOptions } = redisOptions(config, role);
  const url = new URL(config.redisUrl);
  const auth = url.password === '' ? {} : { password: decodeURIComponent(url.password), ...(url.username === '' ? {} : { username: decodeURIComponent(url.username) }) };
  const cluster = new Cluster(config.redisClusterNodes.map((n) => ({ host: n.host, port: n.port })), {
    redisOptions: { ...nodeOptions, ...auth, ...options },
    enableOfflineQueue: enableOfflineQueue ?? true,
    clusterRetryStrategy: retryStrategy ?? null,
    // A failover takes the cluster a few seconds (cluster-node-timeout): refresh the slot map
    // often enough that the promoted replica is found without waiting for a MOVED.
    slotsRefreshInterval: 1_000,
    retryDelayOnFailover: 200,
    retryDelayOnClusterDown: 200,
  });
  // ioredis stops its periodic slot refresh only between rounds: a round in flight when the client
  // ends schedules the next one, and that one the next, every second for ever (a timer that keeps
  // the process alive). Once ended, a round does nothing and schedules nothing.
  cluster.once('end', () => {
    cluster.refreshSlotsCache = () => undefined;
  });
  return cluster;
}

/**
 * A Redis connection of `role`, to the cluster of `REDIS_CLUSTER_NODES` when set, else to
 * `REDIS_URL`. `options.commandTimeout` (ms) overrides the role's: for reads that must not wait long.
 */
export function createRedis(config: RedisConfig, role: RedisRole, logger: Logger, options: Pick<RedisOptions, 'commandTimeout'> = {}): RedisClient {
  const redis: RedisClient = config.redisClusterNodes.length > 0 ? createCluster(config, role, options) : new Redis(config.redisUrl, { ...redisOptions(config, role), ...options });
  let down = false;
  redis.on('error', (err: Error) => {
    if (!down) logger.warn({ err: err.message, role }, 'redis connection error');
    down = true;
  });
  redis.on('ready', () => {
    if (down) logger.info({ role }, 'redis connection restored');
    down = false;
  });
  return redis;
}

/**
 * BullMQ needs `noeviction`: an evicted job key is a lost write. Managed Redis may refuse
 * CONFIG, so INFO is read instead. Returns the policy, or undefined when it cannot be read.
 */
export async function checkEvictionPolicy(redis: RedisClient, logger: Logger): Promise<string | undefined> {
  try {
    const info = await redis.info('memory');
    const policy = /maxmemory_policy:(\S+)/.exec(info)?.[1];
    if (policy === 'noeviction') logger.info({ maxmemory_policy: policy }, 'Redis maxmemory-policy is noeviction');
    else if (policy !== undefined) {
      logger.warn({ maxmemory_policy: policy }, `Redis maxmemory-policy is "${policy}", not "noeviction": Redis may evict queued jobs under memory pressure, losing acknowledged writes. Set maxmemory-policy noeviction.`);
    }
    return policy;
  } catch (err) {
    logger.warn({ err: (err as Error).message }, 'could not read Redis maxmemory-policy');
    return undefined;
  }
}

/**
 * A 200 is only as durable as Redis: with AOF off, a Redis restart loses every queued write
 * since the last RDB snapshot, if any. Returns whether AOF is on, or undefined when unreadable.
 */
export async function checkPersistence(redis: RedisClient, logger: Logger): Promise<boolean | undefined> {
  try {
    const info = await redis.info('persistence');
    const aof = /aof_enabled:(\d)/.exec(info)?.[1];
    if (aof === '1') logger.info({ aof_enabled: true }, 'Redis AOF is on');
    else if (aof === '0') {
      logger.warn({ aof_enabled: false }, 'Redis AOF is off (appendonly no): a Redis restart loses acknowledged writes still in the queue. Set appendonly yes (appendfsync everysec).');
    }
    return aof === undefined ? undefined : aof === '1';
  } catch (err) {
    logger.warn({ err: (err as Error).message }, 'could not read Redis persistence settings');
    return undefined;
  }
}
