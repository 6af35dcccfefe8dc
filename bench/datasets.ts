// `npm run bench:datasets [-- --duration S --rounds N --connections C]`: see bench/scenarios/datasets.ts.
import { parseArgs } from 'node:util';
import { killAllSync, stopAll } from './lib/procs.js';
import { runDatasetsScenario } from './scenarios/datasets.js';

const { values } = parseArgs({ options: { duration: { type: 'string', default: '10' }, rounds: { type: 'string', default: '2' }, connections: { type: 'string', default: '32' } } });
process.once('exit', killAllSync);
try {
  await runDatasetsScenario({ durationS: Number(values.duration), rounds: Number(values.rounds), connections: Number(values.connections) });
} catch (err) {
  process.stderr.write(`bench:datasets failed: ${(err as Error).stack ?? String(err)}\n`);
  await stopAll(2_000);
  process.exitCode = 1;
}
