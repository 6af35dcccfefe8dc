import { startFerretDb, startRedis, type ManagedServer } from '../../devkit/servers.js';
import { endRunIfHeld } from './held-run.js';

// The Redis and MongoDB-wire server of a test run are started once, in mocha's main process (global
// fixtures), also when the run is parallel (`npm test` runs files in two worker processes): the
// workers are forked after the fixtures ran and find the servers' URLs in their environment.
const REDIS_URL_VAR = 'FI_TEST_SHARED_REDIS_URL';
const MONGO_URL_VAR = 'FI_TEST_SHARED_MONGO_URL';

let servers: ManagedServer[] = [];

/** The Redis and MongoDB-wire server shared by the run; each suite uses its own queue and database. */
export function sharedServices(): { redisUrl: string; mongoUrl: string } {
  const redisUrl = process.env[REDIS_URL_VAR];
  const mongoUrl = process.env[MONGO_URL_VAR];
  if (redisUrl === undefined || mongoUrl === undefined) throw new Error('the global fixtures have not started the services');
  return { redisUrl, mongoUrl };
}

export async function mochaGlobalSetup(): Promise<void> {
  const [redis, mongo] = await Promise.all([startRedis(), startFerretDb()]);
  servers = [redis, mongo];
  process.env[REDIS_URL_VAR] = redis.url;
  process.env[MONGO_URL_VAR] = mongo.url;
}

export async function mochaGlobalTeardown(): Promise<void> {
  await Promise.all(servers.map((s) => s.destroy()));
  endRunIfHeld();
}
