// `npx tsx scripts/ferretdb-pg-setup-main.ts --postgresql-url URL [--database NAME]…`: the process
// around scripts/ferretdb-pg-setup.ts, for FerretDB on PostgreSQL only (scripts/start.sh runs it).
// MONGODB_URI names the FerretDB server and, by its path, the default database.
import { parseArgs } from 'node:util';
import { createMongo } from '../shared/mongo.js';
import { loadConfigOrExit } from '../shared/process.js';
import { createFerretDbPgSetup, psqlRunner } from './ferretdb-pg-setup.js';

const USAGE = 'usage: ferretdb-pg-setup-main.ts --postgresql-url postgres://postgres@127.0.0.1:PORT/ferretdb [--database NAME]…';

let values;
try {
  ({ values } = parseArgs({ options: { 'postgresql-url': { type: 'string' }, database: { type: 'string', multiple: true } } }));
} catch (err) {
  process.stderr.write(`${(err as Error).message}\n${USAGE}\n`);
  process.exit(2);
}
const postgresqlUrl = values['postgresql-url'];
if (postgresqlUrl === undefined) {
  process.stderr.write(`${USAGE}\n`);
  process.exit(2);
}
const config = loadConfigOrExit(process.env);
const mongo = createMongo(config);
try {
  const setup = createFerretDbPgSetup({ client: mongo.client, sql: psqlRunner(postgresqlUrl) });
  for (const database of values.database ?? [config.mongodbDatabase]) {
    const report = await setup.setupDatabase(database);
    const created = report.created.length === 0 ? 'no collection created' : `created ${report.created.join(', ')}`;
    process.stdout.write(`${database}: ${created}; ${report.indexes.length} GIN indexes in place\n`);
  }
} catch (err) {
  process.stderr.write(`error: ${(err as Error).message}\n`);
  process.exitCode = 1;
} finally {
  await mongo.close();
}
