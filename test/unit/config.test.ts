import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { ConfigError, loadConfig, type Config } from '../../shared/config.js';
import { createKeyVerifier } from '../../api/key-verifier.js';

/** The ConfigError `loadConfig(env)` throws; fails the test when it does not throw one. */
function configError(env: Record<string, string>): ConfigError {
  let caught: unknown;
  try {
    loadConfig(env);
  } catch (err) {
    caught = err;
  }
  expect(caught, `loadConfig(${JSON.stringify(env)}) must throw a ConfigError, threw ${String(caught)}`).to.be.instanceOf(ConfigError);
  return caught as ConfigError;
}

/** A ConfigError naming `variable`, in its field and in its one-line message. */
function expectRejected(env: Record<string, string>, variable: string): ConfigError {
  const err = configError(env);
  expect(err.variable).to.equal(variable);
  expect(err.message).to.include(variable);
  expect(err.message).to.not.include('\n');
  return err;
}

describe('loadConfig (shared/config.ts)', () => {
  describe('defaults', () => {
    let config: Config;
    before(() => {
      config = loadConfig({});
    });

    it('runs against local services on the documented defaults', () => {
      expect(config.port).to.equal(3000);
      expect(config.redisUrl).to.equal('redis://127.0.0.1:6379');
      expect(config.mongodbUri).to.equal('mongodb://127.0.0.1:27017/feedback');
      expect(config.mongodbDatabase).to.equal('feedback');
      expect(config.nodeEnv).to.equal('development');
    });

    it('limits bodies to 1 MiB and verifies Redis TLS by default', () => {
      expect(config.bodyLimitBytes).to.equal(1024 * 1024);
      expect(config.redisTlsRejectUnauthorized).to.equal(true);
    });

    it('has no API keys and uses the development id secret, saying so', () => {
      expect(config.apiKeys).to.deep.equal([]);
      expect(config.idSigningSecretIsDefault).to.equal(true);
      expect(config.idSigningSecrets).to.have.length(1);
    });

    it('turns numbers and booleans into numbers and booleans', () => {
      const c = loadConfig({ PORT: '8080', BODY_LIMIT_BYTES: '2048', REDIS_TLS_REJECT_UNAUTHORIZED: 'false', BACKLOG_MAX_JOBS: '5' });
      expect(c.port).to.equal(8080);
      expect(c.bodyLimitBytes).to.equal(2048);
      expect(c.redisTlsRejectUnauthorized).to.equal(false);
      expect(c.backlogMaxJobs).to.equal(5);
      expect(loadConfig({ REDIS_TLS_REJECT_UNAUTHORIZED: '0' }).redisTlsRejectUnauthorized).to.equal(false);
      expect(loadConfig({ REDIS_TLS_REJECT_UNAUTHORIZED: '1' }).redisTlsRejectUnauthorized).to.equal(true);
    });

    it('bounds what one API process holds for the queue on the documented defaults', () => {
      expect(config.enqueueMaxPendingWrites).to.equal(20_000);
      expect(config.enqueueMaxPendingBytes).to.equal(64 * 1024 * 1024);
      expect(config.batchMaxBytes).to.equal(4 * 1024 * 1024);
      // The worker holds about WORKER_WRITES_IN_HAND writes: at most 256 small jobs, few large ones (worker/concurrency.ts).
      expect(config.workerConcurrency).to.equal(256);
      expect(config.workerWritesInHand).to.equal(4000);
    });

    it('reads each of those settings from its variable', () => {
      const c = loadConfig({ ENQUEUE_MAX_PENDING_WRITES: '10000000', ENQUEUE_MAX_PENDING_BYTES: String(4 * 1024 ** 3), BATCH_MAX_BYTES: '1024' });
      expect([c.enqueueMaxPendingWrites, c.enqueueMaxPendingBytes, c.batchMaxBytes]).to.deep.equal([10_000_000, 4 * 1024 ** 3, 1024]);
    });

    it('treats an empty variable as unset', () => {
      const c = loadConfig({ PORT: '', REDIS_URL: '', API_KEYS: '' });
      expect(c.port).to.equal(3000);
      expect(c.redisUrl).to.equal('redis://127.0.0.1:6379');
    });

    it('is frozen', () => {
      expect(Object.isFrozen(config)).to.equal(true);
      expect(Object.isFrozen(config.apiKeys)).to.equal(true);
    });

    it('takes the database from the path of MONGODB_URI', () => {
      expect(loadConfig({ MONGODB_URI: 'mongodb://db.example:27017/feedback_prod' }).mongodbDatabase).to.equal('feedback_prod');
      expect(loadConfig({ MONGODB_URI: 'mongodb://db.example:27017' }).mongodbDatabase).to.equal('feedback');
    });

    it('prefers REDIS_TLS_URL over REDIS_URL', () => {
      const c = loadConfig({ REDIS_URL: 'redis://a:6379', REDIS_TLS_URL: 'rediss://b:6380' });
      expect(c.redisUrl).to.equal('rediss://b:6380');
      expect(loadConfig({ REDIS_URL: 'rediss://h:1' }).redisUrl).to.equal('rediss://h:1');
    });
  });

  describe('bad values throw a ConfigError naming the variable', () => {
    const cases: readonly [string, Record<string, string>][] = [
      ['PORT', { PORT: 'abc' }],
      ['PORT', { PORT: '-1' }],
      ['PORT', { PORT: '65536' }],
      ['PORT', { PORT: '80.5' }],
      ['REDIS_URL', { REDIS_URL: 'http://x' }],
      ['REDIS_URL', { REDIS_URL: 'not a url' }],
      ['REDIS_TLS_URL', { REDIS_TLS_URL: 'redis://plain:6379' }],
      ['REDIS_TLS_REJECT_UNAUTHORIZED', { REDIS_TLS_REJECT_UNAUTHORIZED: 'maybe' }],
      ['MONGODB_URI', { MONGODB_URI: 'postgres://x/db' }],
      ['MONGODB_URI', { MONGODB_URI: 'mongodb://x/bad.name' }],
      ['BODY_LIMIT_BYTES', { BODY_LIMIT_BYTES: '10' }],
      ['BODY_LIMIT_BYTES', { BODY_LIMIT_BYTES: '1mb' }],
      ['QUEUE_NAME', { QUEUE_NAME: 'has space' }],
      ['QUEUE_COMPRESSION', { QUEUE_COMPRESSION: 'gzip' }],
      ['LOG_LEVEL', { LOG_LEVEL: 'verbose' }],
      ['WORKER_CONCURRENCY', { WORKER_CONCURRENCY: '0' }],
      ['ENQUEUE_MAX_PENDING_WRITES', { ENQUEUE_MAX_PENDING_WRITES: '0' }],
      ['ENQUEUE_MAX_PENDING_WRITES', { ENQUEUE_MAX_PENDING_WRITES: '10000001' }],
      ['ENQUEUE_MAX_PENDING_BYTES', { ENQUEUE_MAX_PENDING_BYTES: '1023' }],
      ['ENQUEUE_MAX_PENDING_BYTES', { ENQUEUE_MAX_PENDING_BYTES: String(4 * 1024 ** 3 + 1) }],
      ['BATCH_MAX_BYTES', { BATCH_MAX_BYTES: '1023' }],
      ['BATCH_MAX_BYTES', { BATCH_MAX_BYTES: String(256 * 1024 ** 2 + 1) }],
      ['BATCH_MAX_BYTES', { BATCH_MAX_BYTES: '4MiB' }],
      ['ID_SIGNING_SECRETS', { ID_SIGNING_SECRETS: 'short' }],
      ['HTTP_HEADERS_TIMEOUT_MS', { HTTP_HEADERS_TIMEOUT_MS: '20000', HTTP_REQUEST_TIMEOUT_MS: '10000' }],
    ];
    for (const [variable, env] of cases) {
      it(`${variable} for ${JSON.stringify(env)}`, () => {
        expectRejected(env, variable);
      });
    }
  });

  describe('API_KEYS', () => {
    const bad: readonly [string, string][] = [
      ['no colon', 'justakeywithoutname'],
      ['an empty name', ':secret-secret'],
      ['a name with a space', 'my key:secret-secret'],
      ['a name over 64 characters', `${'n'.repeat(65)}:secret-secret`],
      ['a short secret', 'svc:short'],
      ['an empty secret', 'svc:'],
      ['a name used twice', 'svc:secret-one-1,svc:secret-two-2'],
      ['sha256: with too few hex digits', `svc:sha256:${'a'.repeat(63)}`],
      ['sha256: with non-hex digits', `svc:sha256:${'g'.repeat(64)}`],
      ['one bad pair among good ones', 'a:secret-aaaa,b,c:secret-cccc'],
    ];
    for (const [name, value] of bad) {
      it(`rejects ${name}`, () => {
        expectRejected({ API_KEYS: value }, 'API_KEYS');
      });
    }

    it('parses comma-separated name:secret pairs, ignoring blanks and spaces', () => {
      const c = loadConfig({ API_KEYS: ' bot-1:secret-one-1 , ,annotator@tool.io:secret:with:colons ' });
      expect(c.apiKeys.map((k) => k.name)).to.deep.equal(['bot-1', 'annotator@tool.io']);
      const verifier = createKeyVerifier(c.apiKeys);
      expect(verifier.verify('secret-one-1')).to.deep.equal({ name: 'bot-1', datasets: null, admin: false, read: false });
      expect(verifier.verify('secret:with:colons')).to.deep.equal({ name: 'annotator@tool.io', datasets: null, admin: false, read: false });
    });

    it('keeps only a digest of a plaintext secret, never the secret', () => {
      const secret = 'plaintext-secret-value-42';
      const c = loadConfig({ API_KEYS: `svc:${secret}` });
      const key = c.apiKeys[0]!;
      expect(key.digest.equals(createHash('sha256').update(secret).digest())).to.equal(true);
      expect(JSON.stringify(c)).to.not.include(secret);
      expect(Object.values(key).some((v) => typeof v === 'string' && v.includes(secret))).to.equal(false);
    });

    it('accepts sha256:<hex digest> so no plaintext sits in the environment', () => {
      const secret = 'the-real-key-9876';
      const hex = createHash('sha256').update(secret).digest('hex');
      for (const digest of [hex, hex.toUpperCase()]) {
        const c = loadConfig({ API_KEYS: `svc:sha256:${digest}` });
        expect(c.apiKeys.map((k) => k.name)).to.deep.equal(['svc']);
        expect(createKeyVerifier(c.apiKeys).verify(secret)).to.deep.equal({ name: 'svc', datasets: null, admin: false, read: false });
        // The digest string itself is not a key.
        expect(createKeyVerifier(c.apiKeys).verify(`sha256:${digest}`)).to.equal(undefined);
      }
    });
  });

  describe('ID_SIGNING_SECRETS', () => {
    it('is required when NODE_ENV=production', () => {
      const err = expectRejected({ NODE_ENV: 'production' }, 'ID_SIGNING_SECRETS');
      expect(err.message).to.include('production');
    });

    it('production starts with a secret; the first signs, all are kept', () => {
      const c = loadConfig({ NODE_ENV: 'production', ID_SIGNING_SECRETS: 'new-secret-0123456789, old-secret-0123456789' });
      expect(c.idSigningSecrets).to.deep.equal(['new-secret-0123456789', 'old-secret-0123456789']);
      expect(c.idSigningSecretIsDefault).to.equal(false);
    });

    it('rejects a short secret among good ones', () => {
      expectRejected({ ID_SIGNING_SECRETS: 'good-secret-0123456789,tooshort' }, 'ID_SIGNING_SECRETS');
    });
  });

  describe('feedback tokens and CORS', () => {
    it('defaults: 900 s tokens, 3600 s at most, no CORS origin', () => {
      const c = loadConfig({});
      expect([c.feedbackTokenTtlSeconds, c.feedbackTokenMaxTtlSeconds, c.corsOrigins]).to.deep.equal([900, 3600, []]);
    });

    it('rejects a default lifetime above the maximum', () => {
      expectRejected({ FEEDBACK_TOKEN_TTL_SECONDS: '7200' }, 'FEEDBACK_TOKEN_TTL_SECONDS');
      expect(loadConfig({ FEEDBACK_TOKEN_TTL_SECONDS: '7200', FEEDBACK_TOKEN_MAX_TTL_SECONDS: '7200' }).feedbackTokenTtlSeconds).to.equal(7200);
    });

    it('reads CORS_ORIGINS as origins exactly as browsers send them', () => {
      expect(loadConfig({ CORS_ORIGINS: 'https://chat.example.com, http://127.0.0.1:8080' }).corsOrigins).to.deep.equal(['https://chat.example.com', 'http://127.0.0.1:8080']);
      for (const bad of ['*', 'chat.example.com', 'https://chat.example.com/', 'https://chat.example.com/widget', 'ftp://x.example', 'https://CHAT.example.com']) {
        expectRejected({ CORS_ORIGINS: bad }, 'CORS_ORIGINS');
      }
    });
  });
});
