// Peer (textbook worker): the worker a team would write in an afternoon beside the textbook API
// (bench/peers/textbook.ts), not this project's code. One BullMQ job per write, a BullMQ Worker at
// concurrency 16, and per job: `insertOne` of the record and one upsert of its first response, or
// one upsert of a response. No ordering between versions of a response (the last job to run wins),
// no dead letters, BullMQ's default attempts.
import { Worker, type Job } from 'bullmq';
import type { Db } from 'mongodb';
import type { Redis } from 'ioredis';

/** What the textbook API queues: `record` jobs carry the record and its first response, `response` jobs one response. */
export interface TextbookJob {
  readonly feedback_record_id: string;
  readonly feedback_response_id: string;
  readonly record?: Record<string, unknown>;
  readonly response: { readonly status?: string; readonly values: Record<string, unknown>; readonly user_id?: string };
}

export const TEXTBOOK_WORKER_CONCURRENCY = 16;

export function startTextbookWorker(options: { readonly queueName: string; readonly connection: Redis; readonly db: Db; readonly collections: { readonly records: string; readonly responses: string } }): Worker<TextbookJob> {
  const records = options.db.collection<{ _id: string } & Record<string, unknown>>(options.collections.records);
  const responses = options.db.collection<{ _id: string }>(options.collections.responses);
  return new Worker<TextbookJob>(
    options.queueName,
    async (job: Job<TextbookJob>) => {
      const d = job.data;
      const now = new Date();
      if (job.name === 'record') await records.insertOne({ _id: d.feedback_record_id, ...d.record, created_at: now });
      await responses.updateOne(
        { _id: d.feedback_response_id },
        { $set: { feedback_record_id: d.feedback_record_id, status: d.response.status ?? 'submitted', values: d.response.values, user_id: d.response.user_id, updated_at: now }, $setOnInsert: { created_at: now } },
        { upsert: true },
      );
    },
    { connection: options.connection, concurrency: TEXTBOOK_WORKER_CONCURRENCY },
  );
}
