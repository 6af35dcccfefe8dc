import { randomBytes } from 'node:crypto';
import { loadConfig, type Config } from '../../shared/config.js';
import { sharedServices } from './root-hooks.js';

export const TEST_KEY = { name: 'tester', secret: 'test-secret-key-0001' } as const;
export const OTHER_KEY = { name: 'other', secret: 'other-secret-key-0002' } as const;

/** A fresh queue name and database for one suite. */
function uniqueName(prefix: string): string {
  return `${prefix}-${randomBytes(4).toString('hex')}`;
}

/**
 * Config for a test: the shared services (or the given ones), a unique queue and database,
 * port 0, silent logs. `env` overrides any variable.
 */
export function testConfig(env: Record<string, string> = {}, services?: { redisUrl: string; mongoUrl: string }): Config {
  const s = services ?? sharedServices();
  const name = uniqueName('t');
  return loadConfig({
    PORT: '0',
    HOST: '127.0.0.1',
    REDIS_URL: s.redisUrl,
    MONGODB_URI: `${s.mongoUrl}/${name.replace(/-/g, '_')}`,
    QUEUE_NAME: name,
    API_KEYS: `${TEST_KEY.name}:${TEST_KEY.secret},${OTHER_KEY.name}:${OTHER_KEY.secret}`,
    ID_SIGNING_SECRETS: 'test-id-signing-secret-0123456789',
    LOG_LEVEL: 'silent',
    BACKLOG_POLL_MS: '100',
    JOB_BACKOFF_MS: '100',
    SHUTDOWN_TIMEOUT_MS: '5000',
    ...env,
  });
}
