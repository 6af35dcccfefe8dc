import { AppError } from '../shared/errors.js';
import { createGroupCommit } from '../shared/group-commit.js';
import type { Logger } from '../shared/logger.js';
import { encodeJob, type JobCompression } from '../shared/job-payload.js';
import type { OrderClock } from '../shared/order-clock.js';
import type { Write } from '../shared/schemas.js';
import { WRITE_JOB_NAME, type WriteQueue } from '../shared/queue.js';
import type { ApiMetrics } from './metrics.js';

export interface EnqueueReceipt {
  /** The id Redis gave the job that carries the write. */
  readonly jobId: string;
  /** The write's place in that job. */
  readonly index: number;
  /** The write's acceptance order (see shared/order-clock.ts). */
  readonly seq: number;
}

export interface Enqueuer {
  /**
   * Resolves once Redis has acknowledged the job holding `write`. Rejects with a 503 AppError:
   * `overloaded` at once when this process already holds too many writes waiting for a job, or
   * `queue_unavailable` when the write could not be queued in time. `bytes` is the size of the
   * request body, for the byte limits. The write gets its acceptance order here (`seq`).
   */
  enqueue(write: Write, bytes: number): Promise<EnqueueReceipt>;
  /** Sends what is waiting and waits for every job in flight. */
  drain(): Promise<void>;
}

interface EnqueuerOptions {
  readonly queue: WriteQueue;
  readonly logger: Logger;
  readonly metrics: ApiMetrics;
  readonly clock: OrderClock;
  /** Most writes per job. */
  readonly maxItems: number;
  /** Body bytes per job; a larger single write travels alone. */
  readonly maxBytes: number;
  /** Most jobs being added at once; later writes wait and ride in the next job. */
  readonly maxInFlight: number;
  /** Writes waiting for a job above which new writes get 503 `overloaded`. */
  readonly maxPendingWrites: number;
  /** Body bytes waiting for a job above which new writes get 503 `overloaded`. */
  readonly maxPendingBytes: number;
  /**
   * Longest wait of a write for its job to leave, ms, counted from `enqueue()`. Sending is bounded
   * by the Redis connection's own `commandTimeout` (shared/redis.ts), set to the same value.
   */
  readonly timeoutMs: number;
  readonly retryAfterSeconds: number;
  /** How the writes of a job are packed for Redis. */
  readonly compression: JobCompression;
}

/** ioredis' refusal of a command it could not send (no connection and `enableOfflineQueue: false`). */
const NOT_SENT = /enableOfflineQueue|Stream isn't writeable/;
const NOT_QUEUED_MESSAGE = 'the write was not queued (it was never sent to Redis)';
/**
 * The 503 message of a write whose job may have reached Redis after all (documented in the README:
 * retry with the same Idempotency-Key). Exported for the fault suite's ledger, which books such a
 * write as "stored once or not at all" instead of "refused".
 */
export const OUTCOME_UNKNOWN_MESSAGE = 'the write may or may not have been queued (Redis did not acknowledge it); retry with the same Idempotency-Key';

interface Item {
  readonly write: Write;
  readonly bytes: number;
}

/**
 * Writes leave in group-committed jobs (shared/group-commit.ts): Redis runs one script per job
 * instead of one per write.
 */
export function createBatchingEnqueuer(options: EnqueuerOptions): Enqueuer {
  const { queue, logger, metrics, clock, retryAfterSeconds, compression } = options;
  const retryAfter = { 'Retry-After': String(retryAfterSeconds) };
  const unavailable = (message: string, cause?: unknown) => new AppError('queue_unavailable', message, { headers: retryAfter, cause });

  const jobs = createGroupCommit<Item, EnqueueReceipt>({
    maxItems: options.maxItems,
    maxWeight: options.maxBytes,
    weight: (item) => item.bytes,
    maxInFlight: options.maxInFlight,
    async commit(batch) {
      const started = process.hrtime.bigint();
      try {
        const job = await queue.add(WRITE_JOB_NAME, await encodeJob(batch.map((i) => i.write), compression));
        if (job.id === undefined) throw new Error('BullMQ returned a job without id');
        const jobId = job.id;
        metrics.enqueueSeconds.observe(Number(process.hrtime.bigint() - started) / 1e9);
        metrics.batchSize.observe(batch.length);
        return batch.map((item, index) => ({ jobId, index, seq: item.write.seq! }));
      } catch (err) {
        logger.warn({ err: (err as Error).message, writes: batch.length }, 'enqueue failed');
        // ioredis refuses a command it cannot write (no connection, no offline queue): the job was
        // never sent. Anything else (a timeout, a connection lost mid-command) cannot un-send the
        // job: it may still be queued. The client retries with the same Idempotency-Key; the
        // write's order, minted before, keeps a late copy from overwriting anything accepted after it.
        if (NOT_SENT.test((err as Error).message)) throw unavailable(`${NOT_QUEUED_MESSAGE}; retry later`, err);
        throw unavailable(OUTCOME_UNKNOWN_MESSAGE, err);
      }
    },
  });

  const expired = () => unavailable(`${NOT_QUEUED_MESSAGE} in time; retry later`);

  return {
    enqueue(write, bytes) {
      const waiting = jobs.waiting();
      if (waiting.items >= options.maxPendingWrites || waiting.weight + bytes > options.maxPendingBytes) {
        return Promise.reject(
          new AppError('overloaded', 'this API process holds too many writes waiting for Redis; retry later', { headers: retryAfter }),
        );
      }
      const ordered: Write = { ...write, seq: clock.next() };
      return jobs.submit({ write: ordered, bytes }, { deadline: Date.now() + options.timeoutMs, expired });
    },
    drain: () => jobs.drain(),
  };
}
