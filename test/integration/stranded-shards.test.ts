import { expect } from 'chai';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { loadConfig } from '../../shared/config.js';
import type { Logger } from '../../shared/logger.js';
import { queueShards } from '../../shared/redis-keys.js';
import { otherShards, warnOfStrandedShards } from '../../shared/stranded-shards.js';
import { sharedServices } from '../helpers/root-hooks.js';
import { uniqueName } from '../helpers/env.js';

/** A logger that keeps its warnings. */
function warnings(): { logger: Logger; lines: { fields: Record<string, unknown>; message: string }[] } {
  const lines: { fields: Record<string, unknown>; message: string }[] = [];
  const logger = { warn: (fields: Record<string, unknown>, message: string) => lines.push({ fields, message }), info: () => undefined, debug: () => undefined } as unknown as Logger;
  return { logger, lines };
}

describe('jobs stranded in shards outside QUEUE_SHARDS (worker start-up warning)', () => {
  let redis: Redis;
  before(async () => {
    redis = new Redis(sharedServices().redisUrl, { maxRetriesPerRequest: 1 });
  });
  after(async () => {
    await redis.quit();
  });

  const configOf = (queueName: string, shards: number) => loadConfig({ REDIS_URL: sharedServices().redisUrl, QUEUE_NAME: queueName, QUEUE_SHARDS: String(shards), API_KEYS: 'k:0123456789abcdef', ID_SIGNING_SECRETS: 'test-id-signing-secret-0123456789' });

  it('the shards another setting used are every layout but this one\'s', () => {
    const config = configOf('q', 3);
    const own = new Set(queueShards(config).map((s) => s.prefix));
    const others = otherShards(config);
    expect(others.some((s) => own.has(s.prefix))).to.equal(false);
    expect(others.map((s) => s.prefix)).to.include.members(['bull', '{bull:3}', '{bull:255}']);
    expect(otherShards(configOf('q', 1)).map((s) => s.prefix)).to.include('{bull:0}').and.not.include('bull');
  });

  it('warns, naming the shards, when jobs wait where the workers of this QUEUE_SHARDS do not look; not for its own shards', async () => {
    const name = uniqueName('stranded');
    const six = configOf(name, 6);
    const three = configOf(name, 3);
    // A job in shard 4 of six (queued before QUEUE_SHARDS went from 6 to 3) and one in shard 1 (still drained).
    const queues = [4, 1].map((i) => new Queue(name, { connection: redis, prefix: queueShards(six)[i]!.prefix }));
    try {
      for (const q of queues) await q.add('write', { x: 1 });
      const seen = warnings();
      expect(await warnOfStrandedShards(three, redis, seen.logger)).to.deep.equal([`${name}:4`]);
      expect(seen.lines).to.have.length(1);
      expect(seen.lines[0]!.message).to.include('QUEUE_SHARDS=3').and.include(`${name}:4`);
      // Under six shards nothing is stranded: shard 4 is drained again.
      const back = warnings();
      expect(await warnOfStrandedShards(six, redis, back.logger)).to.deep.equal([]);
      expect(back.lines).to.deep.equal([]);
    } finally {
      for (const q of queues) await q.obliterate({ force: true }).catch(() => undefined);
      await Promise.all(queues.map((q) => q.close()));
    }
  });
});
