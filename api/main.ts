import cluster from 'node:cluster';
import { randomInt } from 'node:crypto';
import { asyncStdout, createLogger } from '../shared/logger.js';
import { ORDER_CLOCK_NODES } from '../shared/order-clock.js';
import { loadConfigOrExit, onShutdownSignal } from '../shared/process.js';
import { startApiCluster } from './cluster.js';
import { DevKeyExposedError } from './dev-key-guard.js';
import { ListenError, startApi } from './server.js';

/** The primary waits this much longer than its processes' own shutdown bound for their exits, ms. */
const PRIMARY_SHUTDOWN_MARGIN_MS = 2_000;

const config = loadConfigOrExit(process.env);
if (cluster.isPrimary && config.webConcurrency > 1) {
  // The primary serves nothing itself: node:cluster hands each connection to one of its processes.
  const logger = createLogger({ level: config.logLevel, name: 'api-primary' });
  process.on('unhandledRejection', (err) => logger.error({ err }, 'unhandled rejection'));
  const apiCluster = startApiCluster({ cluster, size: config.webConcurrency, baseNode: config.orderClockNode ?? randomInt(0, ORDER_CLOCK_NODES), logger });
  onShutdownSignal(logger, config.shutdownTimeoutMs + PRIMARY_SHUTDOWN_MARGIN_MS, () => apiCluster.stop());
  apiCluster.ready.then(
    () => logger.info({ processes: config.webConcurrency, port: config.port }, 'api cluster listening'),
    () => undefined,
  );
  // Without a signal the primary ends when its processes did: all exited cleanly, or start-up failed.
  void apiCluster.done.then((code) => {
    process.exitCode = code;
  });
} else {
  const logger = createLogger({ level: config.logLevel, name: 'api', destination: asyncStdout() });
  process.on('unhandledRejection', (err) => logger.error({ err }, 'unhandled rejection'));
  try {
    const api = await startApi(config, logger);
    onShutdownSignal(logger, config.shutdownTimeoutMs, () => api.close());
  } catch (err) {
    // A port in use, or the development key on a public address, is an operator's error, not a
    // bug: one line, as for a bad setting, then exit 1. startApi has closed its connections;
    // exit() still, so that no stray handle keeps it running.
    if (!(err instanceof ListenError) && !(err instanceof DevKeyExposedError)) throw err;
    logger.flush?.();
    process.stderr.write(`${err.message}\n`);
    process.exit(1);
  }
}
