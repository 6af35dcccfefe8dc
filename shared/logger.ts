import { pino, type DestinationStream, type Logger } from 'pino';
import { LineBatch } from './line-batch.js';

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

/** Characters of log lines gathered before they are handed to standard output in one write. */
const STDOUT_BATCH_CHARS = 16384;
/** Longest a line waits in that batch, ms: a quiet process still writes each line within this. */
const STDOUT_FLUSH_MS = 100;

/**
 * Standard output written asynchronously (pino's sonic-boom, sync: false), its lines gathered in
 * batches of {@link STDOUT_BATCH_CHARS} characters or every {@link STDOUT_FLUSH_MS} ms, whichever
 * comes first (shared/line-batch.ts): a log line costs an array push, and ~80 request lines share
 * one write(2) instead of one each. Lines still waiting are flushed synchronously when the process
 * exits; a SIGKILL loses at most the lines of the last 100 ms.
 */
export function asyncStdout(): DestinationStream {
  return new LineBatch(() => pino.destination({ dest: 1, sync: false }), { minChars: STDOUT_BATCH_CHARS, flushMs: STDOUT_FLUSH_MS });
}

/**
 * pino's `stdTimeFunctions.isoTime` (`,"time":"2026-11-27T09:12:13.456Z"`), the same text, made
 * once per millisecond: `toISOString` costs about a microsecond, and a busy API writes several
 * lines in each millisecond. One per logger, so nothing is shared between loggers.
 */
export function cachedIsoTime(now: () => number = Date.now): () => string {
  let last = Number.NaN;
  let text = '';
  return () => {
    const ms = now();
    if (ms !== last) {
      last = ms;
      text = `,"time":"${new Date(ms).toISOString()}"`;
    }
    return text;
  };
}

/** The root logger of a process. `destination` lets tests capture the lines. */
export function createLogger(options: { level: string; name: string; destination?: DestinationStream }): Logger {
  return pino(
    {
      name: options.name,
      level: options.level,
      redact: { paths: [...REDACT_PATHS], censor: '[redacted]' },
      base: { pid: process.pid },
      timestamp: cachedIsoTime(),
      formatters: { level: (label) => ({ level: label }) },
    },
    options.destination,
  );
}
