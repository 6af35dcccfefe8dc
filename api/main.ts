import { asyncStdout, createLogger } from '../shared/logger.js';
import { loadConfigOrExit, onShutdownSignal } from '../shared/process.js';
import { startApi } from './server.js';

const config = loadConfigOrExit(process.env);
const logger = createLogger({ level: config.logLevel, name: 'api', destination: asyncStdout() });
process.on('unhandledRejection', (err) => logger.error({ err }, 'unhandled rejection'));
const api = await startApi(config, logger);
onShutdownSignal(logger, config.shutdownTimeoutMs, () => api.close());
