import { MongoBulkWriteError, type Db, type Filter, type UpdateFilter } from 'mongodb';
import { COLLECTIONS } from '../shared/mongo.js';
import type { Collection, IndexDescription, OptionalUnlessRequiredId } from 'mongodb';
import type { Logger } from '../shared/logger.js';
import type { RecordWrite, Write } from '../shared/schemas.js';
import { isDuplicateKey, isTransientMongoError, TransientStoreError } from './errors.js';

/** A validated write with its place in the acceptance order. */
export interface SequencedWrite {
  readonly write: Write;
  readonly seq: number;
  readonly index: number;
}

export interface WriteOutcome {
  /** Records newly stored or found already stored. */
  readonly records: number;
  /** Responses stored or updated. */
  readonly responses: number;
  /** Response updates skipped because a later-accepted one is already stored. */
  readonly stale: number;
  /** Responses whose record is not stored yet (still queued in another job). */
  readonly deferred: readonly SequencedWrite[];
  /** Writes MongoDB refuses for good, with its reason. */
  readonly rejected: readonly { readonly item: SequencedWrite; readonly error: string }[];
}

export interface RecordDoc {
  _id: string;
  feedback_dataset_id: string;
  field_to_value: Record<string, unknown>;
  external_id?: string;
  metadata?: Record<string, unknown>;
  status: 'submitted';
  api_key: string;
  request_id: string;
  created_at: Date;
  updated_at: Date;
}

export interface ResponseDoc {
  _id: string;
  feedback_record_id: string;
  feedback_dataset_id: string;
  user_id: string;
  status: string;
  values: Record<string, unknown>;
  /** Acceptance order of the update now stored; an update with a lower seq never replaces it. */
  seq: number;
  api_key: string;
  request_id: string;
  created_at: Date;
  updated_at: Date;
}

/**
 * One accepted update of a response, inserted before the update is applied. Inserts with a unique
 * _id are atomic on MongoDB and FerretDB alike, while FerretDB v1 runs an update as an unlocked
 * read-modify-write: two concurrent conditional updates can both pass `seq < mine` and the older
 * can land last. The version log lets every writer check, after its own write, that the newest
 * accepted version is the one stored, and re-apply it if not.
 */
export interface ResponseVersionDoc {
  _id: string;
  response_id: string;
  seq: number;
  feedback_record_id: string;
  feedback_dataset_id: string;
  user_id: string;
  status: string;
  values: Record<string, unknown>;
  api_key: string;
  request_id: string;
  accepted_at: Date;
}

/** Rounds of the convergence check before the job is put back (it is then re-run, idempotently). */
const CONVERGE_ROUNDS = 8;

export interface FeedbackWriter {
  ensureIndexes(): Promise<void>;
  /**
   * Stores a job's writes; throws {@link TransientStoreError} when MongoDB cannot be reached.
   * Calls that arrive while a store round trip is in flight are merged into the next one (one
   * insertMany per collection for all of them), so concurrent jobs share their round trips.
   */
  write(items: readonly SequencedWrite[]): Promise<WriteOutcome>;
}

/** What happened to each write of a merged batch, so that each job gets its own outcome. */
interface ItemOutcomes {
  readonly records: Set<SequencedWrite>;
  readonly responses: Set<SequencedWrite>;
  readonly stale: Set<SequencedWrite>;
  readonly deferred: SequencedWrite[];
  readonly rejected: { item: SequencedWrite; error: string }[];
}

function outcomeOf(all: ItemOutcomes, mine: readonly SequencedWrite[]): WriteOutcome {
  const own = new Set(mine);
  const count = (set: Set<SequencedWrite>) => mine.reduce((n, i) => (set.has(i) ? n + 1 : n), 0);
  return {
    records: count(all.records),
    responses: count(all.responses),
    stale: count(all.stale),
    deferred: all.deferred.filter((i) => own.has(i)),
    rejected: all.rejected.filter((r) => own.has(r.item)),
  };
}

function rethrowTransient(err: unknown): void {
  if (isTransientMongoError(err)) throw new TransientStoreError(err);
}

function recordDoc(w: RecordWrite): RecordDoc {
  const at = new Date(w.accepted_at);
  return {
    _id: w.record_id,
    feedback_dataset_id: w.record.feedback_dataset_id,
    field_to_value: w.record.field_to_value,
    ...(w.record.external_id === undefined ? {} : { external_id: w.record.external_id }),
    ...(w.record.metadata === undefined ? {} : { metadata: w.record.metadata }),
    status: 'submitted',
    api_key: w.api_key,
    request_id: w.request_id,
    created_at: at,
    updated_at: at,
  };
}

function versionDoc(item: SequencedWrite, datasetId: string): ResponseVersionDoc {
  const w = item.write;
  return {
    _id: `${w.response_id}:${String(item.seq).padStart(16, '0')}`,
    response_id: w.response_id,
    seq: item.seq,
    feedback_record_id: w.record_id,
    feedback_dataset_id: datasetId,
    user_id: w.response.user_id,
    status: w.response.status,
    values: w.response.values,
    api_key: w.api_key,
    request_id: w.request_id,
    accepted_at: new Date(w.accepted_at),
  };
}

/** The first response of a new record: the lowest seq of its (record, annotator) pair. */
function firstResponseDoc(item: SequencedWrite): ResponseDoc {
  const w = item.write as RecordWrite;
  const at = new Date(w.accepted_at);
  return {
    _id: w.response_id,
    feedback_record_id: w.record_id,
    feedback_dataset_id: w.record.feedback_dataset_id,
    user_id: w.response.user_id,
    status: w.response.status,
    values: w.response.values,
    seq: item.seq,
    api_key: w.api_key,
    request_id: w.request_id,
    created_at: at,
    updated_at: at,
  };
}

function applyOp(v: ResponseVersionDoc): { filter: Filter<ResponseDoc>; update: UpdateFilter<ResponseDoc> } {
  // Matches only a stored update accepted earlier. When a later one is stored, the filter misses,
  // the upsert tries to insert the same _id and fails with 11000: the stale update is dropped.
  return {
    filter: { _id: v.response_id, seq: { $lt: v.seq } },
    update: {
      $set: { status: v.status, values: v.values, seq: v.seq, api_key: v.api_key, request_id: v.request_id, updated_at: v.accepted_at },
      $setOnInsert: { feedback_record_id: v.feedback_record_id, feedback_dataset_id: v.feedback_dataset_id, user_id: v.user_id, created_at: v.accepted_at },
    },
  };
}

/**
 * The MongoDB side of the worker. Fast path: one insertMany for new records and one bulkWrite
 * for responses per batch. When a batch errs (a rerun meets its own documents, a stale update, a
 * document the store refuses), it falls back to one operation per document, because FerretDB
 * stops a batch at the first error and its error indexes cannot be trusted; every operation is
 * idempotent, so repeating the ones that did apply changes nothing.
 */
export function createFeedbackWriter(options: { db: Db; logger: Logger; maxBatchWrites?: number }): FeedbackWriter {
  const maxBatchWrites = options.maxBatchWrites ?? 2_000;
  interface Waiting {
    readonly items: readonly SequencedWrite[];
    resolve(outcome: WriteOutcome): void;
    reject(err: unknown): void;
  }
  const pending: Waiting[] = [];
  let flushing = false;
  const records = options.db.collection<RecordDoc>(COLLECTIONS.records);
  const responses = options.db.collection<ResponseDoc>(COLLECTIONS.responses);
  const versions = options.db.collection<ResponseVersionDoc>(COLLECTIONS.responseVersions);
  const log = options.logger;

  /**
   * insertMany, then one by one if the batch erred: a duplicate _id means "already there"
   * (returned in `present`), any other refusal is final for that document.
   */
  async function insertAll<D extends { _id: string }>(
    col: Collection<D>,
    docs: readonly { doc: D; item: SequencedWrite }[],
    rejected: { item: SequencedWrite; error: string }[],
  ): Promise<{ inserted: Set<string>; present: Set<string> }> {
    const inserted = new Set<string>();
    const present = new Set<string>();
    if (docs.length === 0) return { inserted, present };
    try {
      await col.insertMany(docs.map((d) => d.doc as OptionalUnlessRequiredId<D>), { ordered: false });
      for (const d of docs) inserted.add(d.doc._id);
      return { inserted, present };
    } catch (err) {
      rethrowTransient(err);
      if (!(err instanceof MongoBulkWriteError) && !isDuplicateKey(err)) log.debug({ err: (err as Error).message }, 'batch insert failed; retrying one by one');
    }
    for (const { doc, item } of docs) {
      try {
        await col.insertOne(doc as OptionalUnlessRequiredId<D>);
        inserted.add(doc._id);
      } catch (err) {
        if (isDuplicateKey(err)) present.add(doc._id);
        else {
          rethrowTransient(err);
          rejected.push({ item, error: (err as Error).message });
        }
      }
    }
    return { inserted, present };
  }

  /** Applies one version; false when a later one is already stored. */
  async function apply(v: ResponseVersionDoc): Promise<boolean> {
    const op = applyOp(v);
    try {
      const r = await responses.updateOne(op.filter, op.update, { upsert: true });
      return r.matchedCount + r.upsertedCount > 0;
    } catch (err) {
      if (isDuplicateKey(err)) return false;
      rethrowTransient(err);
      throw err;
    }
  }

  /**
   * Until, for every id, the stored seq is the newest version's: re-apply the newest. Whoever
   * wrote last runs this after its write, so a stale write that landed late is always repaired.
   * Then drops versions older than the stored one (the newest is kept: a late stale write may
   * still need it).
   */
  async function converge(ids: readonly string[]): Promise<void> {
    for (let round = 0; round < CONVERGE_ROUNDS; round++) {
      const [current, newest] = await Promise.all([
        Promise.all(ids.map((id) => responses.findOne({ _id: id }, { projection: { seq: 1 } }))).then((docs) => docs.filter((d) => d !== null)),
        versions.find({ response_id: { $in: [...ids] } }, { projection: { response_id: 1, seq: 1 } }).toArray(),
      ]);
      const stored = new Map(current.map((d) => [d._id, d.seq]));
      const maxVersion = new Map<string, { seq: number; _id: string }>();
      for (const v of newest) {
        const m = maxVersion.get(v.response_id);
        if (m === undefined || m.seq < v.seq) maxVersion.set(v.response_id, { seq: v.seq, _id: v._id });
      }
      const behind = [...maxVersion.entries()].filter(([id, m]) => (stored.get(id) ?? -1) < m.seq);
      if (behind.length === 0) {
        const prune = [...maxVersion.entries()].map(([id, m]) => ({ deleteMany: { filter: { response_id: id, seq: { $lt: m.seq } } } }));
        if (prune.length > 0) await versions.bulkWrite(prune, { ordered: false }).catch((err: unknown) => log.debug({ err: (err as Error).message }, 'version prune failed; kept'));
        return;
      }
      const docs = await versions.find({ _id: { $in: behind.map(([, m]) => m._id) } }).toArray();
      for (const v of docs) await apply(v);
    }
    throw new TransientStoreError(new Error(`responses did not converge after ${CONVERGE_ROUNDS} rounds of concurrent updates`));
  }

  return {
    async ensureIndexes() {
      // One index per call: FerretDB v1.24 panics on a repeated createIndexes that lists several
      // existing indexes (the second worker to start would never get past this).
      const wanted: [Collection<any>, IndexDescription][] = [
        [records, { key: { feedback_dataset_id: 1, created_at: 1 }, name: 'dataset_created' }],
        [records, { key: { feedback_dataset_id: 1, external_id: 1 }, name: 'dataset_external_id' }],
        [responses, { key: { feedback_record_id: 1, user_id: 1 }, name: 'record_user_unique', unique: true }],
        [responses, { key: { feedback_dataset_id: 1, updated_at: 1 }, name: 'dataset_updated' }],
        [versions, { key: { response_id: 1, seq: 1 }, name: 'response_seq' }],
        [options.db.collection(COLLECTIONS.deadLetters), { key: { failed_at: 1 }, name: 'failed_at' }],
      ];
      for (const [col, index] of wanted) {
        try {
          await col.createIndexes([index]);
        } catch (err) {
          rethrowTransient(err);
          throw err;
        }
      }
    },

    write(items) {
      return new Promise<WriteOutcome>((resolve, reject) => {
        pending.push({ items, resolve, reject });
        if (!flushing) {
          flushing = true;
          // Let the jobs that start in the same turn of the event loop join this batch.
          setImmediate(flush);
        }
      });
    },
  };

  /** Takes waiting calls (whole calls, at least one, up to maxBatchWrites) and stores them at once. */
  function flush(): void {
    const batch: Waiting[] = [];
    let size = 0;
    while (pending.length > 0 && (batch.length === 0 || size + pending[0]!.items.length <= maxBatchWrites)) {
      const next = pending.shift()!;
      batch.push(next);
      size += next.items.length;
    }
    store(batch.flatMap((b) => b.items)).then(
      (all) => {
        for (const b of batch) b.resolve(outcomeOf(all, b.items));
      },
      (err: unknown) => {
        for (const b of batch) b.reject(err);
      },
    ).finally(() => {
      if (pending.length > 0) setImmediate(flush);
      else flushing = false;
    });
  }

  /** Stores the writes of one or more jobs; `seq` orders them across jobs. */
  async function store(items: readonly SequencedWrite[]): Promise<ItemOutcomes> {
    const rejected: { item: SequencedWrite; error: string }[] = [];
    const recordItems = items.filter((i) => i.write.kind === 'record');
    const rec = await insertAll(records, recordItems.map((item) => ({ doc: recordDoc(item.write as RecordWrite), item })), rejected);
    const storedRecordIds = new Set([...rec.inserted, ...rec.present]);
    const storedRecords = new Set(recordItems.filter((i) => storedRecordIds.has(i.write.record_id)));
    const stale = new Set<SequencedWrite>();
    const storedResponses = new Set<SequencedWrite>();

    // The newest update per response id is enough: older ones in the same batch would lose.
    const latest = new Map<string, SequencedWrite>();
    for (const item of items) {
      if (item.write.kind === 'record' && !storedRecords.has(item)) continue;
      const prev = latest.get(item.write.response_id);
      if (prev === undefined || prev.seq < item.seq) {
        if (prev !== undefined) stale.add(prev);
        latest.set(item.write.response_id, item);
      } else stale.add(item);
    }

    // A record's first response has the lowest seq of its pair: a plain insert, and a duplicate
    // means a later update is already stored.
    const firsts = [...latest.values()].filter((i) => i.write.kind === 'record');
    const first = await insertAll(responses, firsts.map((item) => ({ doc: firstResponseDoc(item), item })), rejected);
    for (const item of firsts) {
      if (first.inserted.has(item.write.response_id)) storedResponses.add(item);
      else if (first.present.has(item.write.response_id)) stale.add(item);
    }

    const datasetOf = new Map<string, string>();
    for (const i of recordItems) datasetOf.set(i.write.record_id, (i.write as RecordWrite).record.feedback_dataset_id);
    const updates = [...latest.values()].filter((i) => i.write.kind === 'response');
    const unknown = [...new Set(updates.map((i) => i.write.record_id).filter((id) => !datasetOf.has(id)))];
    // One lookup by _id per record: the only filter FerretDB v1 evaluates in SQL rather than by
    // decoding every document ($in is a full scan there); on MongoDB each is an index hit.
    const found = await Promise.all(
      unknown.map((id) =>
        records.findOne({ _id: id }, { projection: { feedback_dataset_id: 1 } }).catch((err: unknown) => {
          rethrowTransient(err);
          throw err;
        }),
      ),
    );
    for (const r of found) if (r !== null) datasetOf.set(r._id, r.feedback_dataset_id);
    const deferred: SequencedWrite[] = [];
    const ready: { doc: ResponseVersionDoc; item: SequencedWrite }[] = [];
    for (const item of updates) {
      const datasetId = datasetOf.get(item.write.record_id);
      if (datasetId === undefined) deferred.push(item);
      else ready.push({ doc: versionDoc(item, datasetId), item });
    }
    // Logging the version first is what makes the update safe to race (see ResponseVersionDoc);
    // a version the store refuses (FerretDB: nested arrays) is dead-lettered, never applied.
    const logged = await insertAll(versions, ready, rejected);
    const toApply = ready.filter((r) => logged.inserted.has(r.doc._id) || logged.present.has(r.doc._id));
    for (const r of toApply) {
      if (await apply(r.doc)) storedResponses.add(r.item);
      else stale.add(r.item);
    }
    if (toApply.length > 0) await converge([...new Set(toApply.map((r) => r.doc.response_id))]);
    return { records: storedRecords, responses: storedResponses, stale, deferred, rejected };
  }
}
