// `npm run datasets -- apply|list|show`: the process around scripts/datasets.ts.
import { createDatasetAdmin } from '../shared/dataset-admin.js';
import { createMongo } from '../shared/mongo.js';
import { loadConfigOrExit } from '../shared/process.js';
import { runCliProcess } from './cli.js';
import { runDatasetsCommand } from './datasets.js';

const config = loadConfigOrExit(process.env);
const mongo = createMongo(config);
const admin = createDatasetAdmin({ db: mongo.db });
await runCliProcess((io) => runDatasetsCommand(process.argv.slice(2), admin, io), () => mongo.close());
