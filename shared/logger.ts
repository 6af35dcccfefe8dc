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

/**
 * Standard output written asynchronously (pino's sonic-boom, sync: false): a log line costs a
 * buffer append instead of a blocking write(2) per line. Lines still buffered are flushed
 * synchronously when the process exits (pino registers that); a SIGKILL loses at most the lines
 * of the write in progress.
 */
export function asyncStdout(): DestinationStream {
  return pino.destination({ dest: 1, sync: false });
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
