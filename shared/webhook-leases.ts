import type { RedisClient } from './redis.js';

/*
 * The deliveries in flight, in Redis beside their jobs: per endpoint a hash with one field per
 * record whose delivery is in a job of the delivery queue (worker/webhook-dispatcher.ts takes the
 * lease before queueing, the job releases it after writing the outcome to the outbox). It is what
 * keeps at most one delivery per record in flight, and at most WEBHOOK_MAX_IN_FLIGHT per endpoint,
 * without writing the outbox document when it is queued (an update of a document on the store
 * rewrites it whole, body and index entries: docs/webhooks.md#speed). A Redis that loses its data
 * loses the jobs and their leases together; the deliveries are still `pending` in the outbox and
 * are queued again.
 */

/** One record's lease: the pass that queued its delivery, the delivery, and when (ms). */
export interface DeliveryLease {
  readonly claim: string;
  readonly deliveryId: string;
  readonly at: number;
}

export interface DeliveryLeases {
  /** The endpoint's leases, by record id. */
  held(endpointId: string): Promise<Map<string, DeliveryLease>>;
  /** How many each endpoint holds. */
  counts(endpointIds: readonly string[]): Promise<Map<string, number>>;
  /** Takes the leases of records that have none; returns the records taken. */
  take(endpointId: string, claim: string, picks: readonly { readonly key: string; readonly id: string }[]): Promise<Set<string>>;
  /** Of these records, those whose lease this claim holds. */
  mine(endpointId: string, claim: string, keys: readonly string[]): Promise<Set<string>>;
  /** Releases the leases of these records that this claim holds. */
  release(endpointId: string, claim: string, keys: readonly string[]): Promise<void>;
}

const encode = (lease: DeliveryLease) => JSON.stringify([lease.claim, lease.deliveryId, lease.at]);
function decode(value: string): DeliveryLease | undefined {
  try {
    const [claim, deliveryId, at] = JSON.parse(value) as [string, string, number];
    return typeof claim === 'string' && typeof deliveryId === 'string' && typeof at === 'number' ? { claim, deliveryId, at } : undefined;
  } catch {
    return undefined;
  }
}

/** HSETNX of each field (ARGV: field, value, field, value…); returns the fields set. */
const TAKE = `local taken = {}
for i = 1, #ARGV, 2 do
  if redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[i + 1]) == 1 then taken[#taken + 1] = ARGV[i] end
end
return taken`;
/** Deletes the fields (ARGV[2..]) whose value is the claim's (its JSON starts with the claim, ARGV[1]). */
const RELEASE = `local n = 0
for i = 2, #ARGV do
  local v = redis.call('HGET', KEYS[1], ARGV[i])
  if v and string.sub(v, 1, #ARGV[1]) == ARGV[1] then n = n + redis.call('HDEL', KEYS[1], ARGV[i]) end
end
return n`;

export function createDeliveryLeases(options: { readonly redis: RedisClient; readonly key: (endpointId: string) => string; readonly now?: () => number }): DeliveryLeases {
  const { redis } = options;
  const now = options.now ?? Date.now;
  // The claim as it opens its JSON value: a claim that is a prefix of another never matches it (the quote closes it).
  const claimPrefix = (claim: string) => `[${JSON.stringify(claim)},`;
  return {
    async held(endpointId) {
      const all = await redis.hgetall(options.key(endpointId));
      const leases = new Map<string, DeliveryLease>();
      for (const [key, value] of Object.entries(all)) {
        const lease = decode(value);
        if (lease !== undefined) leases.set(key, lease);
      }
      return leases;
    },
    async counts(endpointIds) {
      const n = await Promise.all(endpointIds.map((id) => redis.hlen(options.key(id))));
      return new Map(endpointIds.map((id, i) => [id, n[i]!]));
    },
    async take(endpointId, claim, picks) {
      if (picks.length === 0) return new Set();
      const at = now();
      const args = picks.flatMap((p) => [p.key, encode({ claim, deliveryId: p.id, at })]);
      return new Set((await redis.eval(TAKE, 1, options.key(endpointId), ...args)) as string[]);
    },
    async mine(endpointId, claim, keys) {
      if (keys.length === 0) return new Set();
      const values = await redis.hmget(options.key(endpointId), ...keys);
      return new Set(keys.filter((_, i) => values[i]?.startsWith(claimPrefix(claim)) === true));
    },
    async release(endpointId, claim, keys) {
      if (keys.length === 0) return;
      await redis.eval(RELEASE, 1, options.key(endpointId), claimPrefix(claim), ...keys);
    },
  };
}
