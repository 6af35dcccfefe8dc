import type { RedisClient } from './redis.js';
import type { QueueShard } from './redis-keys.js';

/**
 * Redis `WAIT min timeoutMs` for the writes this process made to `shard`: resolves with the number
 * of replicas that confirmed them. WAIT counts the writes of the connection it runs on, so it must
 * run on the connection that added the job. On one Redis that is the one connection; on a cluster,
 * ioredis keeps one connection per node and sends a pipeline to the node of its keys, so a
 * pipeline holding a key of the shard carries the WAIT to the master that took the job.
 */
export async function waitForReplicas(client: RedisClient, shard: QueueShard, min: number, timeoutMs: number): Promise<number> {
  const replies = await client.pipeline().exists(shard.slotKey).wait(min, timeoutMs).exec();
  const reply = replies?.[1];
  if (reply === undefined) throw new Error('WAIT got no reply');
  if (reply[0] !== null) throw reply[0];
  return Number(reply[1]);
}
