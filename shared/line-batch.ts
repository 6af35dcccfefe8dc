import onExit from 'on-exit-leak-free';
import type { DestinationStream } from 'pino';

/** What a {@link LineBatch} hands its batches to: pino's sonic-boom destination. */
export interface LineSink {
  write(data: string): unknown;
  flushSync(): void;
  readonly destroyed?: boolean;
}

export interface LineBatchOptions {
  /** Characters of lines gathered before they go to the sink in one write. */
  readonly minChars: number;
  /** Longest a line waits in the batch, ms; the timer does not keep the process alive. */
  readonly flushMs: number;
}

/**
 * Log lines gathered in an array and handed to `sink` as one string once `minChars` characters
 * wait, or every `flushMs`. sonic-boom can batch on its own (`minLength`), but its `write` measures
 * the whole pending buffer again (`Buffer.byteLength` of the concatenated string) for every line:
 * with 4 KiB batches that was about 3 µs of a request line's 5 (see docs/performance.md). Here a
 * line costs an array push; the sink measures each batch once and keeps its file descriptor
 * handling (EAGAIN retries, EPIPE, a synchronous flush).
 *
 * Lines still waiting are handed over and flushed synchronously when the process exits (or runs
 * out of work): registered before the sink is made, the batch is flushed ahead of the sink's own
 * exit flush, so no line is lost or reordered at exit. A SIGKILL loses at most `flushMs` of lines.
 */
export class LineBatch implements DestinationStream {
  readonly #sink: LineSink;
  readonly #minChars: number;
  #lines: string[] = [];
  #chars = 0;

  /** `makeSink` is called after the batch registered its exit flush (see above). */
  constructor(makeSink: () => LineSink, options: LineBatchOptions) {
    this.#minChars = options.minChars;
    onExit.register(this, (batch) => batch.flushSync());
    onExit.registerBeforeExit(this, (batch) => batch.flush());
    this.#sink = makeSink();
    setInterval(() => this.flush(), options.flushMs).unref();
  }

  write(line: string): void {
    this.#lines.push(line);
    this.#chars += line.length;
    if (this.#chars >= this.#minChars) this.flush();
  }

  /** Hands the waiting lines to the sink (which writes them asynchronously); a closed sink's lines are dropped, not kept. */
  flush(): void {
    if (this.#lines.length === 0) return;
    const text = this.#lines.length === 1 ? this.#lines[0]! : this.#lines.join('');
    this.#lines = [];
    this.#chars = 0;
    if (this.#sink.destroyed !== true) this.#sink.write(text);
  }

  /** Hands the waiting lines over and writes everything the sink holds before returning. */
  flushSync(): void {
    this.flush();
    if (this.#sink.destroyed !== true) this.#sink.flushSync();
  }
}
