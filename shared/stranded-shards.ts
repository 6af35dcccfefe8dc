import { QUEUE_SHARDS_MAX, type Config } from './config.js';
import type { Logger } from './logger.js';
import type { RedisClient } from './redis.js';
import { queueShards, type QueueShard } from './redis-keys.js';

type ShardConfig = Pick<Config, 'redisKeyPrefix' | 'queueName' | 'queueShards' | 'redisClusterNodes'>;

/** The BullMQ lists and sorted sets of a queue that hold jobs not yet done. */
const PENDING_KEYS = ['wait', 'paused', 'delayed', 'prioritized', 'active', 'waiting-children'] as const;

/**
 * The write-queue shards of other `QUEUE_SHARDS` settings (same `REDIS_KEY_PREFIX` and
 * `QUEUE_NAME`) that this setting's workers do not drain: the sharded layout's shards at or above
 * the count, and, on one Redis, the single-queue layout when this one is sharded (or every shard
 * when it is not). On a cluster the single layout is not looked at: it never ran there.
 */
export function otherShards(config: ShardConfig): QueueShard[] {
  const drained = new Set(queueShards(config).map((s) => s.prefix));
  const sharded = queueShards({ ...config, queueShards: QUEUE_SHARDS_MAX });
  const single = config.redisClusterNodes.length > 0 ? [] : queueShards({ ...config, queueShards: 1 });
  return [...single, ...sharded].filter((s) => !drained.has(s.prefix));
}

/**
 * Warns when shards outside this setting hold jobs: writes answered 200 that no worker drains
 * until `QUEUE_SHARDS` is set back (a change of it with a backlog, docs/scaling.md). One `EXISTS`
 * per shard (its keys share a hash slot); run at start-up, never on the write path. Returns the
 * labels of the shards found holding jobs.
 */
export async function warnOfStrandedShards(config: ShardConfig, redis: RedisClient, logger: Logger): Promise<string[]> {
  try {
    const shards = otherShards(config);
    const held = await Promise.all(shards.map((s) => redis.exists(...PENDING_KEYS.map((k) => `${s.prefix}:${config.queueName}:${k}`))));
    const stranded = shards.filter((_, i) => held[i]! > 0).map((s) => s.label);
    if (stranded.length > 0) {
      logger.warn(
        { stranded_shards: stranded, queue_shards: queueShards(config).length },
        `jobs wait in ${stranded.length} shard queue(s) that QUEUE_SHARDS=${config.queueShards} does not drain (${stranded.slice(0, 8).join(', ')}${stranded.length > 8 ? ', …' : ''}): writes answered 200 stay there until QUEUE_SHARDS is set back to the value they were queued under and they drain (docs/scaling.md)`,
      );
    }
    return stranded;
  } catch (err) {
    logger.warn({ err: (err as Error).message }, 'could not look for jobs in shards outside QUEUE_SHARDS');
    return [];
  }
}
