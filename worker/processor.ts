import { UnrecoverableError, Worker } from 'bullmq';
import * as v from 'valibot';
import { DeadLetterReason, type DeadLetterStore } from '../shared/dead-letters.js';
import type { Logger } from '../shared/logger.js';
import { isWriteJob, legacyAcceptanceSeq, WRITE_JOB_NAME, type WriteJob as AnyWriteJob } from '../shared/queue.js';
import { decodeJob } from '../shared/job-payload.js';
import { Write, writeTargetId } from '../shared/writes.js';
import { MongoError } from 'mongodb';
import type { Sequenced, SequencedWrite } from './documents.js';
import type { Eraser, ErasureItem } from './erasures.js';
import { RecordsPendingError, TransientStoreError, isTransientMongoError } from './errors.js';
import type { WorkerMetrics } from './metrics.js';
import type { FeedbackWriter, WriteResult } from './writer.js';

interface ProcessorDeps {
  readonly writer: FeedbackWriter;
  /** Runs the erasures a job carries (worker/erasures.ts), around its other writes. */
  readonly eraser: Eraser;
  readonly deadLetters: DeadLetterStore;
  readonly logger: Logger;
  readonly metrics: WorkerMetrics;
  readonly queueName: string;
  /** Cap of the pause while MongoDB is unreachable, ms. */
  readonly storeRetryMaxDelayMs: number;
  /**
   * Stops every worker of the queue from taking jobs for `ms` (BullMQ's queue rate limit): while
   * the store is down, jobs stay in the queue in their order and use no attempt.
   */
  readonly pauseQueue: (ms: number) => Promise<void>;
  /** Told whether each store round succeeded or failed as an outage (worker/store-reconnect.ts). */
  readonly storeOutcome?: (ok: boolean) => void;
  /** Largest inflated job payload accepted, bytes; a larger one is dead-lettered as malformed. */
  readonly maxInflatedBytes: number;
}

export interface JobSummary {
  readonly records: number;
  readonly responses: number;
  readonly suggestions: number;
  readonly stale: number;
  readonly dead_lettered: number;
  /** Writes an erasure accepted after them covers (not stored, or removed again), and erasures run. */
  readonly erased?: number;
}

/** A job of the write queue, whose result is its summary. */
type WriteJob = AnyWriteJob<JobSummary>;

interface WriteProcessor {
  process(job: WriteJob): Promise<JobSummary>;
  /** For jobs that failed for good outside the processor (stalled too often): dead-letter their writes. */
  onFailed(job: WriteJob | undefined, err: Error): Promise<void>;
}

function payloadText(value: unknown): string {
  try {
    return JSON.stringify(value) ?? 'undefined';
  } catch {
    return String(value);
  }
}

/**
 * The dead-letter id of a write: its acceptance order and response (or suggestion), unique across Redis resets
 * (job ids are not: Redis hands them out again after it lost data). Writes of old releases
 * without an order, and whole jobs, are named by job id and the time the job was created.
 */
function deadLetterId(queueName: string, job: WriteJob, index: number | null, write: Write | undefined): string {
  if (write?.seq !== undefined) return `${queueName}:w:${write.seq}:${writeTargetId(write)}`;
  return `${queueName}:job:${job.id ?? 'unknown'}:${job.timestamp}:${index === null ? 'job' : index}`;
}

export function createWriteProcessor(deps: ProcessorDeps): WriteProcessor {
  const { writer, deadLetters, logger, metrics, queueName } = deps;
  let transientStreak = 0;

  async function deadLetter(job: WriteJob, reason: DeadLetterReason, error: string, index: number | null, payload: unknown, item?: Sequenced<Write>): Promise<void> {
    const w = item?.write;
    await deadLetters.record({
      _id: deadLetterId(queueName, job, index, w),
      reason,
      error,
      queue: queueName,
      job_id: job.id ?? 'unknown',
      write_index: index,
      request_id: w?.request_id ?? null,
      record_id: w?.record_id ?? null,
      user_id: w !== undefined && (w.kind === 'record' || w.kind === 'response') ? w.response.user_id : null,
      seq: item?.seq ?? null,
      payload_json: payloadText(payload),
    });
    metrics.deadLettered.inc({ reason });
    metrics.writes.inc({ outcome: 'dead_lettered' });
  }

  /** The writes of a job that pass the contract, each with its order; the others are dead-lettered. */
  async function parseWrites(job: WriteJob, writes: readonly unknown[]): Promise<{ items: Sequenced<Write>[]; deadLettered: number }> {
    const items: Sequenced<Write>[] = [];
    let deadLettered = 0;
    for (const [index, raw] of writes.entries()) {
      const parsed = v.safeParse(Write, raw);
      if (!parsed.success) {
        await deadLetter(job, DeadLetterReason.malformedWrite, parsed.issues.map((i) => `${v.getDotPath(i) ?? 'write'}: ${i.message}`).join('; '), index, raw);
        deadLettered++;
        continue;
      }
      const seq = parsed.output.seq ?? legacyAcceptanceSeq(job.id, index);
      if (seq === undefined) {
        await deadLetter(job, DeadLetterReason.malformedWrite, `the write has no seq and job id ${job.id ?? ''} gives none`, index, raw);
        deadLettered++;
        continue;
      }
      items.push({ write: parsed.output, seq, index });
    }
    return { items, deadLettered };
  }

  async function processJob(job: WriteJob): Promise<JobSummary> {
    const log = logger.child({ job_id: job.id, attempt: job.attemptsMade + 1 });
    try {
      if (!isWriteJob(job)) {
        // Not a job of this contract (another producer on the same queue, a name from a future release).
        const error = `unknown job name ${JSON.stringify(job.name)}: this worker takes ${JSON.stringify(WRITE_JOB_NAME)} jobs`;
        await deadLetter(job, DeadLetterReason.malformedJob, error, null, job.data);
        log.error({ reason: DeadLetterReason.malformedJob, job_name: job.name }, 'job of an unknown name dead-lettered');
        metrics.jobs.inc({ outcome: 'failed' });
        throw new UnrecoverableError(error);
      }
      const envelope = decodeJob(job.data, deps.maxInflatedBytes);
      if (!envelope.ok) {
        await deadLetter(job, DeadLetterReason.malformedJob, envelope.error, null, job.data);
        log.error({ reason: DeadLetterReason.malformedJob }, 'malformed job dead-lettered');
        metrics.jobs.inc({ outcome: 'failed' });
        throw new UnrecoverableError(envelope.error);
      }
      const parsed = await parseWrites(job, envelope.writes);
      let deadLettered = parsed.deadLettered;
      const erasures = parsed.items.filter((i): i is ErasureItem => i.write.kind === 'erasure');
      const items = parsed.items.filter((i): i is SequencedWrite => i.write.kind !== 'erasure');
      const jobLog = log.child({ request_ids: [...new Set(parsed.items.map((i) => i.write.request_id))] });

      // An erasure's tombstone is stored before the writes of its job: those below it are then dropped, not stored and removed.
      if (erasures.length > 0) await deps.eraser.begin(erasures);
      const started = process.hrtime.bigint();
      const results = await writer.write(items);
      metrics.writeSeconds.observe(Number(process.hrtime.bigint() - started) / 1e9);
      if (erasures.length > 0) await deps.eraser.finish(erasures);
      transientStreak = 0;
      deps.storeOutcome?.(true);

      const having = (kind: WriteResult['kind']) => items.filter((_, i) => results[i]!.kind === kind);
      for (const [i, item] of items.entries()) {
        const r = results[i]!;
        if (r.kind === 'rejected') {
          await deadLetter(job, DeadLetterReason.storeRejected, r.error, item.index, item.write, item);
          deadLettered++;
        }
      }
      const deferred = having('deferred');
      if (deferred.length > 0) {
        const attempts = job.opts.attempts ?? 1;
        if (job.attemptsMade + 1 < attempts) {
          metrics.writes.inc({ outcome: 'deferred' }, deferred.length);
          metrics.jobs.inc({ outcome: 'retried' });
          jobLog.info({ deferred: deferred.length }, 'responses wait for their records; job will retry');
          throw new RecordsPendingError(deferred.length);
        }
        for (const item of deferred) {
          await deadLetter(job, DeadLetterReason.recordNotStored, `record ${item.write.record_id} was not stored after ${attempts} attempts`, item.index, item.write, item);
          deadLettered++;
        }
      }

      const now = Date.now();
      for (const item of items) metrics.lagSeconds.observe(Math.max(0, now - item.write.accepted_at) / 1000);
      const stored = having('stored');
      const summary: JobSummary = {
        records: stored.filter((i) => i.write.kind === 'record').length,
        responses: stored.filter((i) => i.write.kind === 'response').length,
        suggestions: stored.filter((i) => i.write.kind === 'suggestion').length,
        stale: having('stale').length,
        dead_lettered: deadLettered,
        erased: having('erased').length + erasures.length,
      };
      metrics.batchSize.observe(items.length);
      metrics.writes.inc({ outcome: 'record' }, summary.records);
      metrics.writes.inc({ outcome: 'response' }, summary.responses);
      metrics.writes.inc({ outcome: 'suggestion' }, summary.suggestions);
      metrics.writes.inc({ outcome: 'stale' }, summary.stale);
      metrics.writes.inc({ outcome: 'erased' }, having('erased').length);
      metrics.writes.inc({ outcome: 'erasure' }, erasures.length);
      metrics.jobs.inc({ outcome: 'completed' });
      jobLog.info({ writes: items.length, ...summary }, 'job stored');
      return summary;
    } catch (err) {
      if (err instanceof TransientStoreError || (err instanceof MongoError && isTransientMongoError(err))) {
        // The store is down: pause the whole queue with a growing delay instead of delaying jobs
        // one by one. Jobs keep their order (records stay ahead of their responses) and no
        // attempt is used, however long the outage.
        transientStreak++;
        deps.storeOutcome?.(false);
        const delay = Math.min(deps.storeRetryMaxDelayMs, 250 * 2 ** Math.min(transientStreak, 16));
        log.warn({ err: (err as Error).message, retry_in_ms: delay }, 'store unavailable; queue paused');
        metrics.storeRetries.inc();
        metrics.jobs.inc({ outcome: 'delayed' });
        await deps.pauseQueue(delay);
        throw Worker.RateLimitError();
      }
      throw err;
    }
  }

  return {
    process: processJob,
    async onFailed(job, err) {
      if (job === undefined || err instanceof UnrecoverableError) return;
      const attempts = job.opts.attempts ?? 1;
      const final = job.attemptsMade >= attempts || /stalled/i.test(err.message);
      if (!final) return;
      const envelope = decodeJob(job.data, deps.maxInflatedBytes);
      try {
        if (!envelope.ok) {
          await deadLetter(job, DeadLetterReason.jobFailed, err.message, null, job.data);
          return;
        }
        for (const [index, raw] of envelope.writes.entries()) {
          const parsed = v.safeParse(Write, raw);
          const seq = (parsed.success ? parsed.output.seq : undefined) ?? legacyAcceptanceSeq(job.id, index);
          const item = parsed.success && seq !== undefined ? { write: parsed.output, seq, index } : undefined;
          await deadLetter(job, DeadLetterReason.jobFailed, err.message, index, raw, item);
        }
      } catch (e) {
        logger.error({ job_id: job.id, err: (e as Error).message }, 'could not dead-letter a failed job; it stays in the failed set');
      }
    },
  };
}
