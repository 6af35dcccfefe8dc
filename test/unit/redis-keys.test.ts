import { expect } from 'chai';
import { loadConfig } from '../../shared/config.js';
import { appKeyPrefix, queueShards, shardOf } from '../../shared/redis-keys.js';
import { ConfigError } from '../../shared/config.js';

describe('Redis key names and shards (shared/redis-keys.ts, REDIS_KEY_PREFIX, QUEUE_SHARDS, REDIS_CLUSTER_NODES)', () => {
  it('unset, keeps the keys of earlier releases: one queue bull:<QUEUE_NAME>, app keys feedback-ingest:<QUEUE_NAME>', () => {
    const c = loadConfig({ QUEUE_NAME: 'q' });
    expect(c.queueShards).to.equal(1);
    expect(queueShards(c)).to.deep.equal([{ index: 0, prefix: 'bull', label: 'q', slotKey: 'bull:q:id' }]);
    expect(appKeyPrefix(c)).to.equal('feedback-ingest:q');
  });

  it('puts REDIS_KEY_PREFIX in front of every key', () => {
    const c = loadConfig({ QUEUE_NAME: 'q', REDIS_KEY_PREFIX: 'app-2' });
    expect(queueShards(c).map((s) => s.prefix)).to.deep.equal(['app-2:bull']);
    expect(appKeyPrefix(c)).to.equal('app-2:feedback-ingest:q');
  });

  it('on a cluster, defaults to 6 shards, each with its own hash tag', () => {
    const c = loadConfig({ QUEUE_NAME: 'q', REDIS_KEY_PREFIX: 'p', REDIS_CLUSTER_NODES: '127.0.0.1:7000, redis-b:7001' });
    expect(c.redisClusterNodes).to.deep.equal([{ host: '127.0.0.1', port: 7000 }, { host: 'redis-b', port: 7001 }]);
    const shards = queueShards(c);
    expect(shards.map((s) => s.prefix)).to.deep.equal([0, 1, 2, 3, 4, 5].map((i) => `{p:bull:${i}}`));
    expect(shards.map((s) => s.label)).to.deep.equal([0, 1, 2, 3, 4, 5].map((i) => `q:${i}`));
    expect(shards[2]!.slotKey).to.equal('{p:bull:2}:q:id');
    // One shard on a cluster still needs its hash tag.
    expect(queueShards(loadConfig({ QUEUE_NAME: 'q', QUEUE_SHARDS: '1', REDIS_CLUSTER_NODES: 'h:1' }))[0]!.prefix).to.equal('{bull:0}');
  });

  it('routes a record id to one shard, always the same, and spreads ids over every shard', () => {
    const ids = Array.from({ length: 600 }, (_, i) => `rec_${i.toString(36)}x${(i * 7919).toString(36)}`);
    const counts = [0, 0, 0, 0, 0, 0];
    for (const id of ids) {
      const s = shardOf(id, 6);
      expect(shardOf(id, 6)).to.equal(s);
      counts[s]!++;
    }
    for (const n of counts) expect(n).to.be.within(60, 140);
    expect(shardOf('anything', 1)).to.equal(0);
  });

  it('refuses a bad node list, a bad prefix and a WAIT timeout not below the enqueue timeout, naming the variable', () => {
    const variable = (env: Record<string, string>) => {
      try {
        loadConfig(env);
      } catch (err) {
        if (err instanceof ConfigError) return err.variable;
      }
      return 'accepted';
    };
    expect(variable({ REDIS_CLUSTER_NODES: 'localhost' })).to.equal('REDIS_CLUSTER_NODES');
    expect(variable({ REDIS_CLUSTER_NODES: 'h:70000' })).to.equal('REDIS_CLUSTER_NODES');
    expect(variable({ REDIS_KEY_PREFIX: 'has space' })).to.equal('REDIS_KEY_PREFIX');
    expect(variable({ REDIS_KEY_PREFIX: '{tag}' })).to.equal('REDIS_KEY_PREFIX');
    expect(variable({ REDIS_MIN_REPLICAS_ACK: '1', REDIS_REPLICA_ACK_TIMEOUT_MS: '1000', ENQUEUE_TIMEOUT_MS: '1000' })).to.equal('REDIS_REPLICA_ACK_TIMEOUT_MS');
    expect(variable({ REDIS_MIN_REPLICAS_ACK: '1', REDIS_REPLICA_ACK_TIMEOUT_MS: '999', ENQUEUE_TIMEOUT_MS: '1000' })).to.equal('accepted');
  });
});
