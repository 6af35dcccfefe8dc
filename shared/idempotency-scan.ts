import type { Redis } from 'ioredis';
import type { RedisClient } from './redis.js';

/*
 * The Idempotency-Key entries of api/idempotency.ts seen from outside the API: an erasure removes
 * those whose kept answer names a response of the erased user. Entries live under
 * `<appKeyPrefix>:idem:<hash>` as "d:<fingerprint>:<JSON answer>" (or "p:<fingerprint>" while
 * the first request runs, which holds no answer).
 */

/** The (record, response) id pairs a kept answer names: one write's 200, or each item of a batch's 207. */
export function answerIdPairs(value: string): { recordId: string; responseId: string }[] {
  if (!value.startsWith('d:')) return [];
  const at = value.indexOf(':', 2);
  if (at < 0) return [];
  let body: unknown;
  try {
    body = JSON.parse(value.slice(at + 1));
  } catch {
    return [];
  }
  const pairs: { recordId: string; responseId: string }[] = [];
  const visit = (o: unknown): void => {
    if (typeof o !== 'object' || o === null) return;
    const r = o as Record<string, unknown>;
    if (typeof r.feedback_record_id === 'string' && typeof r.feedback_response_id === 'string') pairs.push({ recordId: r.feedback_record_id, responseId: r.feedback_response_id });
    if (Array.isArray(r.items)) for (const item of r.items) visit((item as Record<string, unknown> | null)?.result);
  };
  visit(body);
  return pairs;
}

function masters(redis: RedisClient): Redis[] {
  return 'nodes' in redis && typeof redis.nodes === 'function' && redis.constructor.name === 'Cluster' ? redis.nodes('master') : [redis as Redis];
}

/**
 * Deletes every idempotency entry under `prefix` whose answer names a pair `matches` accepts;
 * returns how many. SCANs every master (a cluster spreads these keys over all of them).
 */
export async function deleteIdempotencyEntries(redis: RedisClient, prefix: string, matches: (pair: { recordId: string; responseId: string }) => boolean): Promise<number> {
  let deleted = 0;
  for (const node of masters(redis)) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', `${prefix}:idem:*`, 'COUNT', 500);
      cursor = next;
      for (const key of keys) {
        const value = await redis.get(key);
        if (value !== null && answerIdPairs(value).some(matches)) deleted += await redis.del(key);
      }
    } while (cursor !== '0');
  }
  return deleted;
}
