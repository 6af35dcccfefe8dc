import { pino, type DestinationStream, type Logger } from 'pino';

export type { Logger } from 'pino';

/**
 * Paths that must never reach a log line. Keys and bodies are not logged by design; this list is
 * the net under that rule.
 */
const REDACT_PATHS: readonly string[] = [
  'authorization',
  'headers.authorization',
  'req.headers.authorization',
  'request.headers.authorization',
  'apiKey',
  'secret',
  'body',
  '*.body',
  'values',
  '*.values',
  'field_to_value',
  '*.field_to_value',
];

/** Bytes of log lines gathered before one write(2) to standard output (sonic-boom's `minLength`). */
const STDOUT_BATCH_BYTES = 4096;
/** Longest a line waits in that batch, ms: a quiet process still writes each line within this. */
const STDOUT_FLUSH_MS = 100;

/**
 * Standard output written asynchronously (pino's sonic-boom, sync: false) in batches of
 * {@link STDOUT_BATCH_BYTES} or every {@link STDOUT_FLUSH_MS} ms, whichever comes first: a log
 * line costs a buffer append, and ~20 request lines share one write(2) instead of one each.
 * Lines still buffered are flushed synchronously when the process exits (pino registers that); a
 * SIGKILL loses at most the lines of the last 100 ms.
 */
export function asyncStdout(): DestinationStream {
  return pino.destination({ dest: 1, sync: false, minLength: STDOUT_BATCH_BYTES, periodicFlush: STDOUT_FLUSH_MS });
}

/** The root logger of a process. `destination` lets tests capture the lines. */
export function createLogger(options: { level: string; name: string; destination?: DestinationStream }): Logger {
  return pino(
    {
      name: options.name,
      level: options.level,
      redact: { paths: [...REDACT_PATHS], censor: '[redacted]' },
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    options.destination,
  );
}
