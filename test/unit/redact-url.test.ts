import { expect } from 'chai';
import { logConnections, redactUrl } from '../../shared/redact-url.js';

describe('redactUrl (shared/redact-url.ts)', () => {
  for (const [url, shown] of [
    ['redis://127.0.0.1:6390', 'redis://127.0.0.1:6390'],
    ['redis://:s3cret@redis.example:6379/2', 'redis://:***@redis.example:6379/2'],
    ['rediss://default:s3cret@redis.example:25061', 'rediss://default:***@redis.example:25061'],
    // ioredis reads a lone user part as the password.
    ['redis://s3cret@redis.example:6379', 'redis://***@redis.example:6379'],
    ['mongodb://127.0.0.1:27017/feedback', 'mongodb://127.0.0.1:27017/feedback'],
    ['mongodb://app:s3cret@db1:27017,db2:27017/feedback?replicaSet=rs0&w=majority', 'mongodb://app:***@db1:27017,db2:27017/feedback?replicaSet=rs0&w=majority'],
    ['mongodb+srv://app:p%40ss%3Aw0rd@cluster0.example.net/feedback', 'mongodb+srv://app:***@cluster0.example.net/feedback'],
    // An unencoded @ in the password: everything up to the last @ of the authority is credentials.
    ['mongodb://app:s3c@ret@db1/feedback', 'mongodb://app:***@db1/feedback'],
    ['mongodb://db1/feedback?authMechanism=MONGODB-AWS&authMechanismProperties=AWS_SESSION_TOKEN:s3cret', 'mongodb://db1/feedback?authMechanism=MONGODB-AWS&authMechanismProperties=***'],
    ['mongodb://db1/feedback?tlsCertificateKeyFilePassword=s3cret', 'mongodb://db1/feedback?tlsCertificateKeyFilePassword=***'],
  ] as const) {
    it(`${url} → ${shown}`, () => {
      expect(redactUrl(url)).to.equal(shown);
    });
  }

  it('shows nothing of a value that is not a URL', () => {
    expect(redactUrl('s3cret')).to.equal('***');
  });
});

describe('logConnections (shared/redact-url.ts)', () => {
  const lineOf = (config: Parameters<typeof logConnections>[1]): Record<string, unknown> => {
    let logged: Record<string, unknown> = {};
    const logger = { info: (fields: Record<string, unknown>, message: string) => (logged = { ...fields, message }) } as unknown as Parameters<typeof logConnections>[0];
    logConnections(logger, config);
    return logged;
  };
  const base = { redisUrl: 'redis://:secret@127.0.0.1:6390', mongodbUri: 'mongodb://127.0.0.1:27017/feedback', mongodbDatabase: 'feedback', queueName: 'q' };

  it('names the Redis of REDIS_URL, its password redacted', () => {
    const line = lineOf({ ...base, redisClusterNodes: [] });
    expect(line['redis']).to.equal('redis://:***@127.0.0.1:6390');
  });

  it('names the cluster seed nodes with REDIS_CLUSTER_NODES, not REDIS_URL (which then names no server)', () => {
    const line = lineOf({ ...base, redisClusterNodes: [{ host: '10.0.0.1', port: 7000 }, { host: '10.0.0.2', port: 7001 }] });
    expect(line['redis']).to.equal('cluster 10.0.0.1:7000,10.0.0.2:7001');
    expect(String(line['message'])).to.include('using Redis cluster 10.0.0.1:7000,10.0.0.2:7001').and.not.include('6390');
  });
});
