import type { Config } from '../shared/config.js';
import type { Logger } from '../shared/logger.js';
import { withTimeout } from '../shared/process.js';
import type { WriteQueues } from '../shared/queue.js';
import type { RedisClient } from '../shared/redis.js';
import type { ApiMetrics } from './metrics.js';
import { createShardHealth, type ShardHealth } from './shard-health.js';

/**
 * The shard health of the write queue (api/shard-health.ts) with its probe: a write of the
 * shard's own probe key (in the shard's hash slot, so on its master), followed by `WAIT` when
 * `REDIS_MIN_REPLICAS_ACK` asks for replicas: a shard is used again once it takes a write the way
 * a job needs. Changes are logged and exported as `feedback_api_shard_up`.
 */
export function createQueueShardHealth(options: {
  readonly queues: WriteQueues;
  readonly redis: RedisClient;
  readonly config: Pick<Config, 'shardProbeMs' | 'enqueueTimeoutMs' | 'redisMinReplicasAck' | 'redisReplicaAckTimeoutMs'>;
  readonly logger: Logger;
  readonly metrics: ApiMetrics;
}): ShardHealth {
  const { queues, redis, config, logger, metrics } = options;
  for (const s of queues.shards) metrics.shardUp.set({ shard: s.shard.label }, 1);
  async function probe(index: number): Promise<boolean> {
    const shard = queues.shards[index]!.shard;
    let pipeline = redis.pipeline().set(`${shard.slotKey}:probe`, String(Date.now()), 'PX', 60_000);
    if (config.redisMinReplicasAck > 0) pipeline = pipeline.wait(config.redisMinReplicasAck, config.redisReplicaAckTimeoutMs);
    const replies = await withTimeout(pipeline.exec(), config.enqueueTimeoutMs, 'Redis');
    if (replies === null || replies.some(([err]) => err !== null)) return false;
    return config.redisMinReplicasAck === 0 || Number(replies[1]![1]) >= config.redisMinReplicasAck;
  }
  return createShardHealth({
    shards: queues.shards.length,
    probe,
    probeMs: config.shardProbeMs,
    onChange(index, state, reason) {
      const label = queues.shards[index]!.shard.label;
      metrics.shardUp.set({ shard: label }, state === 'up' ? 1 : 0);
      if (state === 'down') logger.warn({ shard: label, reason }, 'queue shard not answering: routing new writes to the other shards');
      else logger.info({ shard: label }, 'queue shard answers again: using it');
    },
  });
}
