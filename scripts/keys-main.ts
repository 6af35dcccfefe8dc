// `npm run keys -- create|list|revoke`: the process around scripts/keys.ts.
import { createApiKeyAdmin } from '../shared/api-keys.js';
import { createMongo } from '../shared/mongo.js';
import { loadConfigOrExit } from '../shared/process.js';
import { runCliProcess } from './cli.js';
import { runKeysCommand } from './keys.js';

const config = loadConfigOrExit(process.env);
const mongo = createMongo(config);
const admin = createApiKeyAdmin({ db: mongo.db, reservedNames: config.apiKeys.map((k) => k.name) });
await runCliProcess((io) => runKeysCommand(process.argv.slice(2), admin, io), () => mongo.close());
