import { DelayedError, UnrecoverableError, type Job } from 'bullmq';
import * as v from 'valibot';
import { DeadLetterReason, type DeadLetterStore } from '../shared/dead-letters.js';
import type { Logger } from '../shared/logger.js';
import { acceptanceSeq } from '../shared/queue.js';
import { decodeJob } from '../shared/job-payload.js';
import { Write } from '../shared/schemas.js';
import { MongoError } from 'mongodb';
import { RecordsPendingError, TransientStoreError, isTransientMongoError } from './errors.js';
import type { WorkerMetrics } from './metrics.js';
import type { FeedbackWriter, SequencedWrite } from './writer.js';

export interface ProcessorDeps {
  readonly writer: FeedbackWriter;
  readonly deadLetters: DeadLetterStore;
  readonly logger: Logger;
  readonly metrics: WorkerMetrics;
  readonly queueName: string;
  /** Cap of the backoff while MongoDB is unreachable, ms. */
  readonly storeRetryMaxDelayMs: number;
}

export interface WriteProcessor {
  process(job: Job, token?: string): Promise<{ records: number; responses: number; stale: number; dead_lettered: number }>;
  /** For jobs that failed for good outside the processor (stalled too often): dead-letter their writes. */
  onFailed(job: Job | undefined, err: Error): Promise<void>;
}

function payloadText(value: unknown): string {
  try {
    return JSON.stringify(value) ?? 'undefined';
  } catch {
    return String(value);
  }
}

export function createWriteProcessor(deps: ProcessorDeps): WriteProcessor {
  const { writer, deadLetters, logger, metrics, queueName } = deps;
  let transientStreak = 0;

  async function deadLetter(job: Job, reason: DeadLetterReason, error: string, index: number | null, payload: unknown, item?: Pick<SequencedWrite, 'seq'> & { write?: SequencedWrite['write'] }): Promise<void> {
    const w = item?.write;
    await deadLetters.record({
      _id: `${queueName}:${job.id ?? 'unknown'}:${index === null ? 'job' : index}`,
      reason,
      error,
      queue: queueName,
      job_id: job.id ?? 'unknown',
      write_index: index,
      request_id: w?.request_id ?? null,
      record_id: w?.record_id ?? null,
      seq: item?.seq ?? null,
      payload_json: payloadText(payload),
    });
    metrics.deadLettered.inc({ reason });
    metrics.writes.inc({ outcome: 'dead_lettered' });
  }

  async function processJob(job: Job, token?: string) {
    const log = logger.child({ job_id: job.id, attempt: job.attemptsMade + 1 });
    try {
      const envelope = decodeJob(job.data);
      if (!envelope.ok) {
        const error = envelope.error;
        await deadLetter(job, DeadLetterReason.malformedJob, error, null, job.data);
        log.error({ reason: DeadLetterReason.malformedJob }, 'malformed job dead-lettered');
        metrics.jobs.inc({ outcome: 'failed' });
        throw new UnrecoverableError(error);
      }

      const items: SequencedWrite[] = [];
      let deadLettered = 0;
      for (const [index, raw] of envelope.writes.entries()) {
        const parsed = v.safeParse(Write, raw);
        if (!parsed.success) {
          await deadLetter(job, DeadLetterReason.malformedWrite, parsed.issues.map((i) => `${v.getDotPath(i) ?? 'write'}: ${i.message}`).join('; '), index, raw);
          deadLettered++;
          continue;
        }
        const seq = parsed.output.seq ?? acceptanceSeq(job.id, index);
        if (seq === undefined) {
          await deadLetter(job, DeadLetterReason.malformedWrite, `job id ${job.id ?? ''} gives no acceptance order and the write has no seq`, index, raw);
          deadLettered++;
          continue;
        }
        items.push({ write: parsed.output, seq, index });
      }
      const requestIds = [...new Set(items.map((i) => i.write.request_id))];
      const jobLog = log.child({ request_ids: requestIds });

      const started = process.hrtime.bigint();
      const outcome = await writer.write(items);
      metrics.writeSeconds.observe(Number(process.hrtime.bigint() - started) / 1e9);
      transientStreak = 0;

      for (const r of outcome.rejected) {
        await deadLetter(job, DeadLetterReason.storeRejected, r.error, r.item.index, r.item.write, r.item);
        deadLettered++;
      }
      if (outcome.deferred.length > 0) {
        const attempts = job.opts.attempts ?? 1;
        if (job.attemptsMade + 1 < attempts) {
          metrics.writes.inc({ outcome: 'deferred' }, outcome.deferred.length);
          metrics.jobs.inc({ outcome: 'retried' });
          jobLog.info({ deferred: outcome.deferred.length }, 'responses wait for their records; job will retry');
          throw new RecordsPendingError(outcome.deferred.length);
        }
        for (const item of outcome.deferred) {
          await deadLetter(job, DeadLetterReason.recordNotStored, `record ${item.write.record_id} was not stored after ${attempts} attempts`, item.index, item.write, item);
          deadLettered++;
        }
      }

      const now = Date.now();
      for (const item of items) metrics.lagSeconds.observe(Math.max(0, now - item.write.accepted_at) / 1000);
      metrics.batchSize.observe(items.length);
      metrics.writes.inc({ outcome: 'record' }, outcome.records);
      metrics.writes.inc({ outcome: 'response' }, outcome.responses);
      metrics.writes.inc({ outcome: 'stale' }, outcome.stale);
      metrics.jobs.inc({ outcome: 'completed' });
      jobLog.info({ writes: items.length, records: outcome.records, responses: outcome.responses, stale: outcome.stale, dead_lettered: deadLettered }, 'job stored');
      return { records: outcome.records, responses: outcome.responses, stale: outcome.stale, dead_lettered: deadLettered };
    } catch (err) {
      if (err instanceof TransientStoreError || (err instanceof MongoError && isTransientMongoError(err))) {
        // MongoDB is down: put the job back with a growing delay. This uses no attempt, so an
        // outage of any length neither burns the job's attempts nor dead-letters anything.
        transientStreak++;
        const delay = Math.min(deps.storeRetryMaxDelayMs, 250 * 2 ** Math.min(transientStreak, 16));
        log.warn({ err: (err as Error).message, retry_in_ms: delay }, 'store unavailable; job delayed');
        metrics.storeRetries.inc();
        metrics.jobs.inc({ outcome: 'delayed' });
        await job.moveToDelayed(Date.now() + delay, token);
        throw new DelayedError();
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
      const envelope = decodeJob(job.data);
      try {
        if (!envelope.ok) {
          await deadLetter(job, DeadLetterReason.jobFailed, err.message, null, job.data);
          return;
        }
        for (const [index, raw] of envelope.writes.entries()) {
          const seq = acceptanceSeq(job.id, index) ?? null;
          const parsed = v.safeParse(Write, raw);
          await deadLetter(job, DeadLetterReason.jobFailed, err.message, index, raw, seq === null ? undefined : { seq, ...(parsed.success ? { write: parsed.output } : {}) });
        }
      } catch (e) {
        logger.error({ job_id: job.id, err: (e as Error).message }, 'could not dead-letter a failed job; it stays in the failed set');
      }
    },
  };
}
