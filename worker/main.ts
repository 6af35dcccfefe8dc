import { createLogger } from '../shared/logger.js';
import { loadConfigOrExit, onShutdownSignal } from '../shared/process.js';
import { IndexSetupError } from './indexes.js';
import { startWorker } from './runtime.js';

const config = loadConfigOrExit(process.env);
const logger = createLogger({ level: config.logLevel, name: 'worker' });
process.on('unhandledRejection', (err) => logger.error({ err }, 'unhandled rejection'));
try {
  const runtime = await startWorker(config, logger);
  onShutdownSignal(logger, config.shutdownTimeoutMs, () => runtime.close());
} catch (err) {
  // Waiting would not help (an index that conflicts with an existing one): one line, then exit.
  if (!(err instanceof IndexSetupError)) throw err;
  logger.fatal(err.message);
  logger.flush?.();
  process.exitCode = 1;
}
