// `npm run dead-letters -- list|show|retry|purge`: the process around scripts/dead-letters.ts.
import { createDeadLetterAdmin } from '../shared/dead-letter-admin.js';
import { createLogger } from '../shared/logger.js';
import { createMongo } from '../shared/mongo.js';
import { loadConfigOrExit } from '../shared/process.js';
import { createWriteQueue } from '../shared/queue.js';
import { createRedis } from '../shared/redis.js';
import { runDeadLettersCommand } from './dead-letters.js';

const config = loadConfigOrExit(process.env);
// Connection trouble goes to stderr; stdout carries the command's output only.
const logger = createLogger({ level: 'warn', name: 'dead-letters', destination: process.stderr });
const mongo = createMongo(config);
const redis = createRedis(config, 'producer', logger);
const queue = createWriteQueue(config, redis);
queue.on('error', (err) => logger.debug({ err: err.message }, 'queue error'));
try {
  // The producer connection has no offline queue: wait for it, but not forever.
  if (process.argv[2] === 'retry') {
    await Promise.race([
      queue.waitUntilReady(),
      new Promise((_, reject) => setTimeout(() => reject(new Error(`Redis did not answer within ${config.enqueueTimeoutMs * 5} ms`)), config.enqueueTimeoutMs * 5).unref()),
    ]);
  }
  const admin = createDeadLetterAdmin({ db: mongo.db, queue, compression: config.queueCompression });
  process.exitCode = await runDeadLettersCommand(process.argv.slice(2), admin, {
    out: (line) => process.stdout.write(`${line}\n`),
    err: (line) => process.stderr.write(`${line}\n`),
  });
} catch (err) {
  process.stderr.write(`error: ${(err as Error).message}\n`);
  process.exitCode = 1;
} finally {
  await queue.close().catch(() => undefined);
  await redis.quit().catch(() => redis.disconnect());
  await mongo.close();
}
