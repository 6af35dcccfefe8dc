import type { Config } from './config.js';

type KeyConfig = Pick<Config, 'redisKeyPrefix' | 'queueName' | 'queueShards' | 'redisClusterNodes'>;

/** One BullMQ queue of the write queue: its place, BullMQ prefix and a name for logs and dashboards. */
export interface QueueShard {
  readonly index: number;
  /** BullMQ `prefix`: its keys are `<prefix>:<QUEUE_NAME>:…`. */
  readonly prefix: string;
  /** `QUEUE_NAME`, or `QUEUE_NAME:<index>` when there are several shards (dead letters, logs, dashboard). */
  readonly label: string;
  /** A key of the shard (its job-id counter): routes a key-less command (`WAIT`) to the shard's node on a cluster. */
  readonly slotKey: string;
}

/** `REDIS_KEY_PREFIX` and its colon, or nothing: unset keeps the keys of earlier releases. */
const lead = (config: Pick<Config, 'redisKeyPrefix'>) => (config.redisKeyPrefix === '' ? '' : `${config.redisKeyPrefix}:`);

/**
 * Namespace of the API's own keys (idempotency keys, rate-limit counters):
 * `[<REDIS_KEY_PREFIX>:]feedback-ingest:<QUEUE_NAME>`. Each of them is used by single-key commands
 * only, so on a cluster they need no hash tag and spread over every master.
 */
export function appKeyPrefix(config: Pick<Config, 'redisKeyPrefix' | 'queueName'>): string {
  return `${lead(config)}feedback-ingest:${config.queueName}`;
}

/**
 * The BullMQ queues of the write queue. One shard on one Redis keeps BullMQ's own layout
 * (`[<REDIS_KEY_PREFIX>:]bull:<QUEUE_NAME>:…`). Otherwise shard i has the prefix
 * `{[<REDIS_KEY_PREFIX>:]bull:<i>}`: BullMQ's scripts touch many keys of a queue at once, which a
 * Redis Cluster allows only within one hash slot, and the braces make the slot depend on that
 * part alone (a hash tag). Different shards hash to different slots, so they spread over masters.
 */
export function queueShards(config: KeyConfig): readonly QueueShard[] {
  const base = `${lead(config)}bull`;
  const shard = (index: number, prefix: string, label: string): QueueShard => ({ index, prefix, label, slotKey: `${prefix}:${config.queueName}:id` });
  if (config.queueShards === 1 && config.redisClusterNodes.length === 0) return [shard(0, base, config.queueName)];
  return Array.from({ length: config.queueShards }, (_, index) => shard(index, `{${base}:${index}}`, config.queueShards === 1 ? config.queueName : `${config.queueName}:${index}`));
}

/**
 * The shard of a record, and of every response to it: FNV-1a of the record id. The record's job
 * is then ahead of its responses' jobs in one FIFO queue, as on a single queue. Stable across
 * processes and releases for a given shard count.
 */
export function shardOf(recordId: string, shards: number): number {
  if (shards === 1) return 0;
  let h = 0x811c9dc5;
  for (let i = 0; i < recordId.length; i++) {
    h ^= recordId.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) % shards;
}

/**
 * The BullMQ queue of webhook deliveries, apart from the write queue so that a slow endpoint
 * never delays a write: `<QUEUE_NAME>-webhooks`, one hash slot on a Redis Cluster (braces).
 */
export function webhookQueue(config: Pick<Config, 'redisKeyPrefix' | 'queueName' | 'redisClusterNodes'>): { readonly name: string; readonly prefix: string } {
  const base = `${lead(config)}bull`;
  return { name: `${config.queueName}-webhooks`, prefix: config.redisClusterNodes.length === 0 ? base : `{${base}:webhooks}` };
}

/**
 * The lock of the webhook fan-out (shared/webhook-fan-out-lock.ts): held by the one worker process
 * moving events from `webhook_batches` into `webhook_outbox`, and by an erasure removing events.
 */
export function webhookFanOutLockKey(config: Pick<Config, 'redisKeyPrefix' | 'queueName'>): string {
  return `${appKeyPrefix(config)}:webhook-fan-out`;
}

/**
 * The hash of an endpoint's deliveries in flight (shared/webhook-leases.ts): one field per record
 * with a delivery job in the delivery queue. One key per endpoint, used by single-key commands only.
 */
export function webhookLeaseKey(config: Pick<Config, 'redisKeyPrefix' | 'queueName'>, endpointId: string): string {
  return `${appKeyPrefix(config)}:webhook-leases:${endpointId}`;
}
