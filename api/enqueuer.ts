import { AppError } from '../shared/errors.js';
import { createGroupCommit } from '../shared/group-commit.js';
import type { Logger } from '../shared/logger.js';
import { encodeJob, type JobCompression } from '../shared/job-payload.js';
import type { OrderClock } from '../shared/order-clock.js';
import { withTimeout } from '../shared/process.js';
import type { Write } from '../shared/writes.js';
import { WRITE_JOB_NAME, type ShardQueue, type WriteQueues } from '../shared/queue.js';
import type { ApiMetrics } from './metrics.js';
import type { ShardHealth } from './shard-health.js';

export interface EnqueueReceipt {
  /** The id Redis gave the job that carries the write. */
  readonly jobId: string;
  /** The write's place in that job. */
  readonly index: number;
  /** The write's acceptance order (see shared/order-clock.ts). */
  readonly seq: number;
  /** The write as queued: its record id is a new one when it was moved off a failing shard (see `remint`). */
  readonly write: Write;
}

export interface EnqueueOptions {
  /**
   * Mints the write again with a new record id (a new record whose caller has not been told its
   * id, and no Idempotency-Key fixes it): lets a record move off a shard that is down. Without
   * it a record stays on its shard (its id decides it); a response moves freely.
   */
  readonly remint?: () => Write;
}

export interface Enqueuer {
  /**
   * Resolves once Redis has acknowledged the job holding `write`. Rejects with a 503 AppError:
   * `overloaded` at once when this process already holds too many writes waiting for a job, or
   * `queue_unavailable` when the write could not be queued in time. `bytes` is the size of the
   * request body, for the byte limits. The write gets its acceptance order here (`seq`).
   */
  enqueue(write: Write, bytes: number, options?: EnqueueOptions): Promise<EnqueueReceipt>;
  /** Sends what is waiting and waits for every job in flight. */
  drain(): Promise<void>;
}


/**
 * `Retry-After` of 503 `overloaded`, from `RETRY_AFTER_SECONDS`: a backlog above its ceiling
 * takes longer to clear than Redis takes to come back, so clients wait five times longer. The
 * one place both refusals (this process's pending writes, the queue's backlog) take it from.
 */
export function overloadedRetryAfterSeconds(retryAfterSeconds: number): number {
  return retryAfterSeconds * 5;
}

/** `REDIS_MIN_REPLICAS_ACK`: a job counts as queued once this many replicas confirmed it. */
interface ReplicaAck {
  readonly min: number;
  /** Redis `WAIT` on the connection that added the shard's job; resolves with the replicas that confirmed. */
  confirm(shard: ShardQueue): Promise<number>;
}

interface EnqueuerOptions {
  /** The shard queues; a write goes to its record's shard, and each shard has its own group commit. */
  readonly queues: WriteQueues;
  /** Absent or `min: 0`: a job is queued once its master acknowledged it. */
  readonly replicaAck?: ReplicaAck;
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
  /** Which shards answer (api/shard-health.ts); absent = every write goes to its record's shard, whatever happens there. */
  readonly health?: ShardHealth;
}

/** ioredis' refusal of a command it could not send (no connection and `enableOfflineQueue: false`). */
const NOT_SENT = /enableOfflineQueue|Stream isn't writeable/;
/** The start of a 503 `queue_unavailable` message of a write that never reached Redis (docs/api.md quotes it). */
export const NOT_QUEUED_MESSAGE = 'the write was not queued (it was never sent to Redis)';
/**
 * The 503 message of a write whose job may have reached Redis after all (documented in docs/api.md:
 * retry with the same Idempotency-Key). Exported for the fault suite's ledger, which books such a
 * write as "stored once or not at all" instead of "refused".
 */
export const OUTCOME_UNKNOWN_MESSAGE = 'the write may or may not have been queued (Redis did not acknowledge it); retry with the same Idempotency-Key';

/** Thrown when fewer replicas than `REDIS_MIN_REPLICAS_ACK` confirmed a job that the master holds. */
class ReplicaAckError extends Error {
  constructor(confirmed: number, min: number) {
    super(`${confirmed} of ${min} replicas confirmed the job`);
    this.name = 'ReplicaAckError';
  }
}

interface Item {
  readonly write: Write;
  readonly bytes: number;
  readonly remint: (() => Write) | undefined;
  /** How often it was sent again after its shard refused it (bounded by MAX_MOVES). */
  readonly moves: number;
}

/** Times a refused job's writes are sent again elsewhere before the caller gets 503 (every shard refusing). */
const MAX_MOVES = 2;

/** Redis refused the command before running it: the cluster has no master for the slot now. */
const REFUSED = /CLUSTERDOWN|TRYAGAIN/;

/**
 * Writes leave in group-committed jobs (shared/group-commit.ts): Redis runs one script per job
 * instead of one per write.
 */
export function createBatchingEnqueuer(options: EnqueuerOptions): Enqueuer {
  const { queues, logger, metrics, clock, retryAfterSeconds, compression, replicaAck, health } = options;
  const retryAfter = { 'Retry-After': String(retryAfterSeconds) };
  const unavailable = (message: string, cause?: unknown) => new AppError('queue_unavailable', message, { headers: retryAfter, cause });

  const commitTo = (shard: ShardQueue) => async (batch: readonly Item[]): Promise<EnqueueReceipt[]> => {
    const started = process.hrtime.bigint();
    try {
      // Bounded: BullMQ waits for a connection that is not ready yet (a Redis never reached since
      // start-up) without sending anything, and the request would hang. A late add is "outcome
      // unknown" to the caller, and stored once if it happens (the ids and order are minted).
      const job = await withTimeout(shard.queue.add(WRITE_JOB_NAME, await encodeJob(batch.map((i) => i.write), compression)), options.timeoutMs, 'Redis');
      if (job.id === undefined) throw new Error('BullMQ returned a job without id');
      const jobId = job.id;
      if (replicaAck !== undefined && replicaAck.min > 0) {
        // The master holds the job; a failover before a replica has it would lose it. Too few
        // confirmations is "outcome unknown": the job may well survive (and is then stored once).
        const confirmed = await replicaAck.confirm(shard);
        if (confirmed < replicaAck.min) throw new ReplicaAckError(confirmed, replicaAck.min);
      }
      health?.reportSuccess(shard.shard.index);
      metrics.enqueueSeconds.observe(Number(process.hrtime.bigint() - started) / 1e9);
      metrics.batchSize.observe(batch.length);
      return batch.map((item, index) => ({ jobId, index, seq: item.write.seq!, write: item.write }));
    } catch (err) {
      const message = (err as Error).message;
      logger.warn({ err: message, writes: batch.length, shard: shard.shard.label }, 'enqueue failed');
      // ioredis refuses a command it cannot write (no connection, no offline queue), and a
      // cluster refuses one for a slot without a master: the job was never queued. Anything else
      // (a timeout, a connection lost mid-command, too few replicas) cannot un-send the job: it
      // may still be queued. The client retries with the same Idempotency-Key; the write's
      // order, minted before, keeps a late copy from overwriting anything accepted after it.
      const notQueued = !(err instanceof ReplicaAckError) && (NOT_SENT.test(message) || REFUSED.test(message));
      if (health !== undefined) {
        health.reportFailure(shard.shard.index, message);
        // Writes still waiting for this shard leave for a healthy one; and a job that was never
        // queued goes there too when each of its writes may move.
        moveWaiting(shard.shard.index);
        if (notQueued && batch.every((item) => movable(item) && item.moves < MAX_MOVES) && health.nextHealthy(shard.shard.index) !== undefined) {
          return Promise.all(batch.map((item) => send({ ...item, moves: item.moves + 1 }, Date.now() + options.timeoutMs)));
        }
      }
      if (notQueued) throw unavailable(`${NOT_QUEUED_MESSAGE}; retry later`, err);
      throw unavailable(OUTCOME_UNKNOWN_MESSAGE, err);
    }
  };

  // One group commit per shard: a job carries writes of one shard only. BATCH_MAX_IN_FLIGHT
  // applies per shard, so shards on different masters are written in parallel.
  const perShard = queues.shards.map((shard) =>
    createGroupCommit<Item, EnqueueReceipt>({
      maxItems: options.maxItems,
      maxWeight: options.maxBytes,
      weight: (item) => item.bytes,
      maxInFlight: options.maxInFlight,
      commit: commitTo(shard),
    }),
  );

  const expired = () => unavailable(`${NOT_QUEUED_MESSAGE} in time; retry later`);

  /** A response or a suggestion may go to any shard (the worker orders by `seq` and waits for its record); a new record only by a new id. */
  const toRecord = (item: Item): boolean => item.write.kind === 'response' || item.write.kind === 'suggestion';
  const movable = (item: Item): boolean => toRecord(item) || item.remint !== undefined;

  /**
   * Where a write goes: its record's shard while that one answers (or when it may not move, or
   * no shard answers), else the next shard that answers; a record moves by a new id, minted
   * until it falls on a shard that answers.
   */
  function place(item: Item): { shard: number; item: Item } {
    const home = queues.forRecord(item.write.record_id).shard.index;
    if (health === undefined || health.healthy(home) || !movable(item)) return { shard: home, item };
    if (toRecord(item)) {
      const other = health.nextHealthy(home);
      if (other === undefined) return { shard: home, item };
      metrics.rerouted.inc({ from_shard: queues.shards[home]!.shard.label });
      return { shard: other, item };
    }
    for (let attempt = 0; attempt < 64; attempt++) {
      const write: Write = { ...item.remint!(), seq: item.write.seq! };
      const shard = queues.forRecord(write.record_id).shard.index;
      if (health.healthy(shard)) {
        metrics.rerouted.inc({ from_shard: queues.shards[home]!.shard.label });
        return { shard, item: { ...item, write } };
      }
    }
    return { shard: home, item };
  }

  function send(item: Item, deadline: number): Promise<EnqueueReceipt> {
    const placed = place(item);
    return perShard[placed.shard]!.submit(placed.item, { deadline, expired });
  }

  /** Takes the writes waiting for `shard` and sends each again (to another shard when it may move). */
  function moveWaiting(shard: number): void {
    for (const w of perShard[shard]!.takeWaiting()) {
      send(w.item, Date.now() + options.timeoutMs).then(w.resolve, w.reject);
    }
  }

  return {
    enqueue(write, bytes, opts = {}) {
      let items = 0;
      let weight = 0;
      for (const jobs of perShard) {
        const w = jobs.waiting();
        items += w.items;
        weight += w.weight;
      }
      if (items >= options.maxPendingWrites || weight + bytes > options.maxPendingBytes) {
        return Promise.reject(
          new AppError('overloaded', 'this API process holds too many writes waiting for Redis; retry later', { headers: { 'Retry-After': String(overloadedRetryAfterSeconds(retryAfterSeconds)) } }),
        );
      }
      return send({ write: { ...write, seq: clock.next() }, bytes, remint: opts.remint, moves: 0 }, Date.now() + options.timeoutMs);
    },
    drain: async () => {
      await Promise.all(perShard.map((jobs) => jobs.drain()));
    },
  };
}
