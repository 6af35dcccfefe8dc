// The drain benchmark's yardsticks: the store's own rate for the same final documents as a burst
// (no ordering, leases or lookups), and plain insertMany of as many documents.
import type { AnyBulkWriteOperation } from 'mongodb';
import { COLLECTIONS } from '../../shared/mongo.js';
import type { ResponseWrite } from '../../shared/writes.js';
import type { RecordDoc, ResponseDoc } from '../../shared/documents.js';
import { loadConfig } from '../../shared/config.js';
import { firstResponseDoc, recordDoc } from '../../worker/documents.js';
import { withHistory } from '../../worker/response-history.js';
import { INSERT_BATCH, recordWrite, type Burst, type Seed } from '../lib/drain-writes.js';
import type { Monitor } from '../lib/store-monitor.js';
import { verifyStored } from './worker-drain.js';

/** Updates per bulk command: more, or several bulks at once, stall FerretDB v1 (docs/ARCHITECTURE.md, "FerretDB and leases"). */

export interface RawResult {
  readonly seconds: number;
  readonly rate: number;
  readonly commands: Map<string, number>;
  /** CPU µs per write of the store's processes over the inserts and updates; NaN when not read. */
  readonly storeCpuUsPerWrite: number;
  readonly insertSeconds: number;
  readonly updateSeconds: number;
  readonly updates: number;
  readonly verified: string;
}

/**
 * insertMany of the new documents (batches of 500), then the distinct final updates in one unordered bulkWrite (the driver splits it at the server's batch limit).
 * `historyCap`: the worker's RESPONSE_HISTORY_MAX (default: its default); above 0 the documents carry the history the worker's would.
 */
export async function rawBurst(mon: Monitor, dbName: string, burst: Burst, seed: Seed, historyCap = loadConfig({}).responseHistoryMax): Promise<RawResult> {
  const db = mon.client.db(dbName);
  const records = db.collection<RecordDoc>(COLLECTIONS.records);
  const responses = db.collection<ResponseDoc>(COLLECTIONS.responses);
  const recordDocs: RecordDoc[] = [];
  const responseDocs: ResponseDoc[] = [];
  const finalUpdate = new Map<string, ResponseWrite>();
  // Every version of each updated response, for its final history (the worker keeps each one later than the stored version).
  const versions = new Map<string, ResponseWrite[]>();
  for (const w of burst.writes) {
    if (w.kind === 'record') {
      recordDocs.push(recordDoc(w));
      const doc = firstResponseDoc({ write: w, seq: w.seq!, index: 0 });
      responseDocs.push(historyCap > 0 ? withHistory(doc) : doc);
    } else {
      if ((finalUpdate.get(w.response_id)?.seq ?? -1) < w.seq!) finalUpdate.set(w.response_id, w);
      versions.set(w.response_id, [...(versions.get(w.response_id) ?? []), w]);
    }
  }
  // The same final documents as the worker's: with history on (RESPONSE_HISTORY_MAX, as the
  // worker runs by default), the response's history ends with its final version, after the seeded
  // one and every version of the burst, the oldest dropped beyond the cap.
  const seeded = new Map(seed.responses.map((d) => [d._id, d]));
  const historyOf = (id: string) => {
    const first = seeded.get(id);
    const all = [...(first === undefined ? [] : [{ status: first.status, values: first.values, seq: first.seq, updated_at: first.updated_at, request_id: first.request_id }]), ...(versions.get(id) ?? []).sort((a, b) => a.seq! - b.seq!).map((w) => ({ status: w.response.status, values: w.response.values, seq: w.seq!, updated_at: new Date(w.accepted_at), request_id: w.request_id }))];
    return all.slice(-(historyCap + 1));
  };
  const ops: AnyBulkWriteOperation<ResponseDoc>[] = [...finalUpdate.values()].map((w) => ({
    updateOne: {
      filter: { _id: w.response_id },
      update: { $set: { status: w.response.status, values: w.response.values, seq: w.seq!, api_key: w.api_key, request_id: w.request_id, updated_at: new Date(w.accepted_at), ...(historyCap > 0 ? { history: historyOf(w.response_id), history_has_current: true } : {}) } },
    },
  }));
  mon.take();
  const started = process.hrtime.bigint();
  for (let i = 0; i < recordDocs.length; i += INSERT_BATCH) {
    await records.insertMany(recordDocs.slice(i, i + INSERT_BATCH), { ordered: false });
    await responses.insertMany(responseDocs.slice(i, i + INSERT_BATCH), { ordered: false });
  }
  const inserted = process.hrtime.bigint();
  if (ops.length > 0) await responses.bulkWrite(ops, { ordered: false });
  const ended = process.hrtime.bigint();
  const commands = mon.take();
  const seconds = Number(ended - started) / 1e9;
  return {
    seconds,
    rate: burst.writes.length / seconds,
    commands,
    storeCpuUsPerWrite: (mon.lastStoreCpuSeconds() * 1e6) / burst.writes.length,
    insertSeconds: Number(inserted - started) / 1e9,
    updateSeconds: Number(ended - inserted) / 1e9,
    updates: ops.length,
    verified: await verifyStored(db, seed, burst),
  };
}

export interface PlainResult {
  readonly seconds: number;
  readonly rate: number;
  readonly docs: number;
}

/** Plain insertMany (batches of 500) of as many documents as the burst's writes hold (a record and a response per record write, a response per update), fresh ids. */
export async function plainInserts(mon: Monitor, dbName: string, burst: Burst): Promise<PlainResult> {
  const db = mon.client.db(dbName);
  const records = db.collection<RecordDoc>(COLLECTIONS.records);
  const responses = db.collection<ResponseDoc>(COLLECTIONS.responses);
  const recordDocs: RecordDoc[] = [];
  const responseDocs: ResponseDoc[] = [];
  for (const w of burst.writes) {
    const r = w.kind === 'record' ? w : recordWrite(0);
    if (w.kind === 'record') recordDocs.push(recordDoc(r));
    const doc = firstResponseDoc({ write: r, seq: w.seq!, index: 0 });
    responseDocs.push(w.kind === 'record' ? doc : { ...doc, _id: `rsp_plain_${w.seq!}`, user_id: `plain-${w.seq!}` });
  }
  const started = process.hrtime.bigint();
  for (let i = 0; i < recordDocs.length; i += INSERT_BATCH) await records.insertMany(recordDocs.slice(i, i + INSERT_BATCH), { ordered: false });
  for (let i = 0; i < responseDocs.length; i += INSERT_BATCH) await responses.insertMany(responseDocs.slice(i, i + INSERT_BATCH), { ordered: false });
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  return { seconds, rate: burst.writes.length / seconds, docs: recordDocs.length + responseDocs.length };
}
