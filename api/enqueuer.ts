import { AppError } from '../shared/errors.js';
import type { Logger } from '../shared/logger.js';
import { encodeJob, type JobCompression } from '../shared/job-payload.js';
import type { Write } from '../shared/schemas.js';
import { WRITE_JOB_NAME, type WriteQueue } from '../shared/queue.js';
import type { ApiMetrics } from './metrics.js';

export interface EnqueueReceipt {
  /** The id Redis gave the job that carries the write. */
  readonly jobId: string;
  /** The write's place in that job. */
  readonly index: number;
}

export interface Enqueuer {
  /** Resolves once Redis has acknowledged the job holding `write`; rejects with a 503 AppError. */
  enqueue(write: Write): Promise<EnqueueReceipt>;
  /** Sends what is pending and waits for every job in flight. */
  drain(): Promise<void>;
}

export interface EnqueuerOptions {
  readonly queue: WriteQueue;
  readonly logger: Logger;
  readonly metrics: ApiMetrics;
  /** Most writes per job. */
  readonly maxItems: number;
  /** Most jobs being added at once; later writes wait and ride in the next job. */
  readonly maxInFlight: number;
  /** Longest wait for Redis to acknowledge a job, ms. */
  readonly timeoutMs: number;
  readonly retryAfterSeconds: number;
  /** How the writes of a job are packed for Redis. */
  readonly compression: JobCompression;
}

interface Pending {
  readonly write: Write;
  readonly resolve: (receipt: EnqueueReceipt) => void;
  readonly reject: (err: unknown) => void;
}

/**
 * Group commit: while a job is being added, new writes gather and leave together in the next
 * one. Under light load a write leaves alone at once (one event-loop turn of coalescing); under a
 * burst, jobs fill up to `maxItems` and Redis runs one script per batch instead of one per write,
 * which is what lifts the API from ~5k to near Koa's own ceiling (see bench/).
 */
export function createBatchingEnqueuer(options: EnqueuerOptions): Enqueuer {
  const { queue, logger, metrics, maxItems, maxInFlight, timeoutMs, retryAfterSeconds, compression } = options;
  let pending: Pending[] = [];
  let inFlight = 0;
  let scheduled = false;
  const idle: (() => void)[] = [];

  const unavailable = (cause: unknown) =>
    new AppError('queue_unavailable', 'the write could not be queued; retry later', {
      headers: { 'Retry-After': String(retryAfterSeconds) },
      cause,
    });

  async function send(batch: Pending[]): Promise<void> {
    const started = process.hrtime.bigint();
    let timer: NodeJS.Timeout | undefined;
    try {
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`Redis did not acknowledge within ${timeoutMs} ms`)), timeoutMs);
      });
      const job = await Promise.race([encodeJob(batch.map((p) => p.write), compression).then((data) => queue.add(WRITE_JOB_NAME, data)), timeout]);
      if (job.id === undefined) throw new Error('BullMQ returned a job without id');
      const jobId = job.id;
      metrics.enqueueSeconds.observe(Number(process.hrtime.bigint() - started) / 1e9);
      metrics.batchSize.observe(batch.length);
      batch.forEach((p, index) => p.resolve({ jobId, index }));
    } catch (err) {
      logger.warn({ err: (err as Error).message, writes: batch.length }, 'enqueue failed');
      const error = unavailable(err);
      for (const p of batch) p.reject(error);
    } finally {
      clearTimeout(timer);
    }
  }

  function pump(): void {
    scheduled = false;
    while (pending.length > 0 && inFlight < maxInFlight) {
      const batch = pending.length <= maxItems ? pending : pending.slice(0, maxItems);
      pending = pending.length <= maxItems ? [] : pending.slice(maxItems);
      inFlight++;
      void send(batch).finally(() => {
        inFlight--;
        if (pending.length > 0) schedule();
        else if (inFlight === 0) for (const done of idle.splice(0)) done();
      });
    }
  }

  function schedule(): void {
    if (scheduled || inFlight >= maxInFlight) return;
    scheduled = true;
    // setImmediate lets the requests already parsed in this turn of the event loop join the job.
    setImmediate(pump);
  }

  return {
    enqueue(write) {
      return new Promise<EnqueueReceipt>((resolve, reject) => {
        pending.push({ write, resolve, reject });
        schedule();
      });
    },
    drain() {
      if (pending.length === 0 && inFlight === 0) return Promise.resolve();
      return new Promise<void>((resolve) => {
        idle.push(resolve);
        schedule();
      });
    },
  };
}
