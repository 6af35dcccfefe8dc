// `npm run dead-letters -- list|show|retry|purge`: the process around scripts/dead-letters.ts.
import { createDeadLetterAdmin } from '../shared/dead-letter-admin.js';
import { createLogger } from '../shared/logger.js';
import { createMongo } from '../shared/mongo.js';
import { loadConfigOrExit } from '../shared/process.js';
import { createWriteQueues } from '../shared/queue.js';
import { createRedis } from '../shared/redis.js';
import { runCliProcess } from './cli.js';
import { runDeadLettersCommand } from './dead-letters.js';

const config = loadConfigOrExit(process.env);
// Connection trouble goes to stderr; stdout carries the command's output only.
const logger = createLogger({ level: 'warn', name: 'dead-letters', destination: process.stderr });
const mongo = createMongo(config);
// A retry waits for Redis to connect, but not forever: every command fails after the timeout.
const redis = createRedis(config, 'worker', logger, { commandTimeout: config.enqueueTimeoutMs * 5 });
const queues = createWriteQueues(config, redis);
for (const { queue } of queues.shards) queue.on('error', (err) => logger.debug({ err: err.message }, 'queue error'));
const admin = createDeadLetterAdmin({ db: mongo.db, queues, compression: config.queueCompression });
await runCliProcess(
  (io) => runDeadLettersCommand(process.argv.slice(2), admin, io),
  async () => {
    await queues.close().catch(() => undefined);
    await redis.quit().catch(() => redis.disconnect());
    await mongo.close();
  },
);
