import { randomBytes } from 'node:crypto';
import type { Db } from 'mongodb';
import { COLLECTIONS } from '../../shared/mongo.js';
import type { RecordWrite } from '../../shared/writes.js';
import type { RecordDoc, ResponseDoc } from '../../shared/documents.js';
import { firstResponseDoc, recordDoc } from '../../worker/documents.js';

interface RawRate {
  /** Writes (a record with its first response, or a response) stored per second. */
  readonly rate: number;
  readonly writes: number;
  readonly seconds: number;
  readonly batch: number;
  readonly concurrency: number;
}

/**
 * The store's own speed for the documents the worker writes: `concurrency` loops, each storing
 * batches of `batch` writes as one insertMany of record documents and one insertMany of response
 * documents (the same shapes as worker/writer.ts; `recordShare` of the writes carry a record),
 * into collections that have the project's indexes. No queue, no validation, no upserts: what a
 * bare client gets out of this MongoDB-wire server, measured in the same round as the worker.
 */
export async function rawInsertManyRate(db: Db, sample: RecordWrite, options: { batch: number; concurrency: number; seconds: number; recordShare: number }): Promise<RawRate> {
  const records = db.collection<RecordDoc>(COLLECTIONS.records);
  const responses = db.collection<ResponseDoc>(COLLECTIONS.responses);
  const batch = Math.max(1, Math.round(options.batch));
  const recordsPerBatch = Math.max(1, Math.round(batch * options.recordShare));
  const prefix = randomBytes(6).toString('base64url');
  let n = 0;
  const id = (kind: string) => `${kind}_${prefix}${(n++).toString(36).padStart(24, '0')}`;
  const deadline = Date.now() + options.seconds * 1000;
  let writes = 0;
  const started = process.hrtime.bigint();

  async function loop(): Promise<void> {
    while (Date.now() < deadline) {
      const at = new Date();
      const recordDocs: RecordDoc[] = [];
      const responseDocs: ResponseDoc[] = [];
      for (let i = 0; i < batch; i++) {
        const recordId = id('rec');
        const write: RecordWrite = { ...sample, record_id: recordId, response_id: id('rsp'), accepted_at: at.getTime() };
        if (i < recordsPerBatch) recordDocs.push(recordDoc(write));
        responseDocs.push(firstResponseDoc({ write, seq: n, index: 0 }));
      }
      await records.insertMany(recordDocs, { ordered: false });
      await responses.insertMany(responseDocs, { ordered: false });
      writes += batch;
    }
  }

  await Promise.all(Array.from({ length: Math.max(1, options.concurrency) }, loop));
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  return { rate: writes / seconds, writes, seconds, batch, concurrency: options.concurrency };
}
