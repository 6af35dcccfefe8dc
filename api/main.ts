import { asyncStdout, createLogger } from '../shared/logger.js';
import { loadConfigOrExit, onShutdownSignal } from '../shared/process.js';
import { DevKeyExposedError } from './dev-key-guard.js';
import { ListenError, startApi } from './server.js';

const config = loadConfigOrExit(process.env);
const logger = createLogger({ level: config.logLevel, name: 'api', destination: asyncStdout() });
process.on('unhandledRejection', (err) => logger.error({ err }, 'unhandled rejection'));
try {
  const api = await startApi(config, logger);
  onShutdownSignal(logger, config.shutdownTimeoutMs, () => api.close());
} catch (err) {
  // A port in use, or the development key on a public address, is an operator's error, not a bug:
  // one line, as for a bad setting, then exit 1. startApi has closed its connections; exit()
  // still, so that no stray handle keeps it running.
  if (!(err instanceof ListenError) && !(err instanceof DevKeyExposedError)) throw err;
  logger.flush?.();
  process.stderr.write(`${err.message}\n`);
  process.exit(1);
}
