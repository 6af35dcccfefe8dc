import { startFerretDb, startRedis, type ManagedServer } from '../../devkit/servers.js';
import { endRunIfHeld } from './held-run.js';

let redis: ManagedServer | undefined;
let mongo: ManagedServer | undefined;

/** The Redis and MongoDB-wire server shared by the run; each suite uses its own queue and database. */
export function sharedServices(): { redisUrl: string; mongoUrl: string } {
  if (redis === undefined || mongo === undefined) throw new Error('root hooks have not started the services');
  return { redisUrl: redis.url, mongoUrl: mongo.url };
}

export const mochaHooks = {
  async beforeAll(this: Mocha.Context) {
    this.timeout(60_000);
    [redis, mongo] = await Promise.all([startRedis(), startFerretDb()]);
  },
  async afterAll(this: Mocha.Context) {
    this.timeout(30_000);
    await Promise.all([redis?.destroy(), mongo?.destroy()]);
    endRunIfHeld();
  },
};
