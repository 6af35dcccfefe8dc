// `npm run keys -- create|list|revoke`: the process around scripts/keys.ts.
import { createApiKeyAdmin } from '../shared/api-keys.js';
import { createMongo } from '../shared/mongo.js';
import { loadConfigOrExit } from '../shared/process.js';
import { runKeysCommand } from './keys.js';

const config = loadConfigOrExit(process.env);
const mongo = createMongo(config);
try {
  const admin = createApiKeyAdmin({ db: mongo.db, reservedNames: config.apiKeys.map((k) => k.name) });
  process.exitCode = await runKeysCommand(process.argv.slice(2), admin, {
    out: (line) => process.stdout.write(`${line}\n`),
    err: (line) => process.stderr.write(`${line}\n`),
  });
} catch (err) {
  process.stderr.write(`error: ${(err as Error).message}\n`);
  process.exitCode = 1;
} finally {
  await mongo.close();
}
