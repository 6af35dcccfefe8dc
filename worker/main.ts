import { createLogger } from '../shared/logger.js';
import { loadConfigOrExit, onShutdownSignal } from '../shared/process.js';
import { startWorker } from './runtime.js';

const config = loadConfigOrExit(process.env);
const logger = createLogger({ level: config.logLevel, name: 'worker' });
process.on('unhandledRejection', (err) => logger.error({ err }, 'unhandled rejection'));
const runtime = await startWorker(config, logger);
onShutdownSignal(logger, config.shutdownTimeoutMs, () => runtime.close());
