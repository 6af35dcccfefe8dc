// `npm run dead-letters -- list|show|retry|purge`: the process around scripts/dead-letters.ts.
import { createDeadLetterAdmin } from '../shared/dead-letter-admin.js';
import { createLogger } from '../shared/logger.js';
import { createMongo } from '../shared/mongo.js';
import { loadConfigOrExit } from '../shared/process.js';
import { createWriteQueue } from '../shared/queue.js';
import { createRedis } from '../shared/redis.js';
import { runCliProcess } from './cli.js';
import { runDeadLettersCommand } from './dead-letters.js';

const config = loadConfigOrExit(process.env);
// Connection trouble goes to stderr; stdout carries the command's output only.
const logger = createLogger({ level: 'warn', name: 'dead-letters', destination: process.stderr });
const mongo = createMongo(config);
// A retry waits for Redis to connect, but not forever: every command fails after the timeout.
const redis = createRedis(config, 'worker', logger, { commandTimeout: config.enqueueTimeoutMs * 5 });
const queue = createWriteQueue(config, redis);
queue.on('error', (err) => logger.debug({ err: err.message }, 'queue error'));
const admin = createDeadLetterAdmin({ db: mongo.db, queue, compression: config.queueCompression });
await runCliProcess(
  (io) => runDeadLettersCommand(process.argv.slice(2), admin, io),
  async () => {
    await queue.close().catch(() => undefined);
    await redis.quit().catch(() => redis.disconnect());
    await mongo.close();
  },
);
