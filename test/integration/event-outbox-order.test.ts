import { expect } from 'chai';
import { Redis } from 'ioredis';
import { MongoClient, type Db } from 'mongodb';
import { COLLECTIONS, mongoClientOptions } from '../../shared/mongo.js';
import { createWebhookAdmin } from '../../shared/webhook-admin.js';
import type { WebhookEndpointDoc } from '../../shared/webhook-admin.js';
import { batchLines, type BatchDoc, type DeliveryDoc } from '../../shared/webhook-outbox.js';
import type { RecordWrite } from '../../shared/writes.js';
import type { ResponseDoc } from '../../shared/documents.js';
import type { SequencedWrite } from '../../worker/documents.js';
import { decodeBatch } from '../../worker/batch-lines.js';
import type { StoredEvent } from '../../shared/webhook-events.js';
import { BATCH_EVENTS, createEventOutbox } from '../../worker/event-outbox.js';
import { createOutboxEraser } from '../../worker/erasure-outbox.js';
import { responseEvent } from '../../worker/stored-events.js';
import type { ErasedResponse } from '../../worker/erasure-guard.js';
import { createFanOutLock, type FanOutLock } from '../../worker/fan-out-lock.js';
import { ensureIndexes } from '../../worker/indexes.js';
import { createRoundEvents } from '../../worker/round-events.js';
import { createFeedbackWriter } from '../../worker/writer.js';
import { createWebhookFanOut, FAN_OUT_COMMAND_DOCS } from '../../worker/webhook-fan-out.js';
import { pruneOrphanedEvents } from '../../worker/webhook-orphans.js';
import type { WebhookSubscriptions } from '../../worker/webhook-subscriptions.js';
import { uniqueName } from '../helpers/env.js';
import { gate, holdingCall } from '../helpers/held-calls.js';
import { sharedServices } from '../helpers/root-hooks.js';
import { silentLogger } from '../helpers/stack.js';
import { recordWrite, version } from '../helpers/writes.js';

/** One endpoint subscribed to everything: the outbox's own logic is under test, not the subscriptions'. */
const ENDPOINT = { _id: 'wh_order', url: 'http://127.0.0.1:9/hook', events: [], datasets: null, description: null, secret: 'whsec_x', created_at: new Date() } as unknown as WebhookEndpointDoc;
const ONE_ENDPOINT: WebhookSubscriptions = {
  any: () => true,
  matching: () => [ENDPOINT],
  all: () => [ENDPOINT],
  byId: (id: string) => (id === ENDPOINT._id ? ENDPOINT : undefined),
  refresh: () => Promise.resolve(),
  close: () => Promise.resolve(),
} as unknown as WebhookSubscriptions;

describe('webhook outbox: a round\'s events become visible in order', () => {
  let client: MongoClient;
  let redis: Redis;
  let db: Db;
  let lock: FanOutLock;
  before(async () => {
    client = new MongoClient(sharedServices().mongoUrl, mongoClientOptions());
    redis = new Redis(sharedServices().redisUrl);
    db = client.db(uniqueName('outbox_order').replace(/-/g, '_'));
    lock = createFanOutLock({ redis, key: `${uniqueName('fan-out-lock')}` });
    await ensureIndexes(db);
  });
  after(async () => {
    await db.dropDatabase().catch(() => undefined);
    await client.close();
    redis.disconnect();
  });
  beforeEach(async () => {
    await db.collection(COLLECTIONS.webhookOutbox).deleteMany({});
    await db.collection(COLLECTIONS.webhookBatches).deleteMany({});
  });

  it('more events than one store command holds: while the fan-out\'s first command is held, no record shows a later event without its earlier one', async () => {
    // As a round builds them: every record.created first, then the records' first responses.
    const n = Math.ceil(FAN_OUT_COMMAND_DOCS * 0.6);
    expect(2 * n, 'one batch').to.be.at.most(BATCH_EVENTS);
    const at = new Date();
    const records: StoredEvent[] = Array.from({ length: n }, (_, i) => ({ type: 'record.created', seq: 1000 + i, recordId: `rec_${i}`, subjectId: `rec_${i}`, datasetId: 'ds', at, data: { feedback_record_id: `rec_${i}` } as never }));
    // Later writes (an annotator's response to each record): in (seq, rank) order every record.created comes first, so the second command holds responses of records in the first.
    const responses: StoredEvent[] = Array.from({ length: n }, (_, i) => ({ type: 'response.created', seq: 5000 + i, recordId: `rec_${i}`, subjectId: `resp_${i}`, datasetId: 'ds', at, data: { feedback_response_id: `resp_${i}` } as never }));
    await createEventOutbox({ db, subscriptions: ONE_ENDPOINT, logger: silentLogger }).append([...records, ...responses]);
    expect(await db.collection(COLLECTIONS.webhookBatches).countDocuments(), 'one append, one endpoint: one batch').to.equal(1);
    const g = gate();
    const fanOut = createWebhookFanOut({ db: holdingCall(db, COLLECTIONS.webhookOutbox, 'insertMany', 1, g.onHeld, g.released), lock, logger: silentLogger });
    const moved = fanOut.move(ENDPOINT._id, 1);
    await g.held;
    const col = db.collection<DeliveryDoc>(COLLECTIONS.webhookOutbox);
    // What the dispatcher could read while the first command waits (polled for a bounded time):
    // for every record, its visible events are a prefix of its events in (seq, rank) order.
    const deadline = Date.now() + 1_500;
    let polls = 0;
    while (Date.now() < deadline) {
      const visible = await col.find({}, { projection: { key: 1, rank: 1 } }).toArray();
      const ranks = new Map<string, number[]>();
      for (const d of visible) ranks.set(d.key, [...(ranks.get(d.key) ?? []), d.rank]);
      const withoutTheirRecord = [...ranks].filter(([, r]) => r.includes(1) && !r.includes(0)).map(([key]) => key);
      expect(withoutTheirRecord, `response.created visible before its record.created (poll ${polls})`).to.deep.equal([]);
      polls++;
      await new Promise((r) => setTimeout(r, 50));
    }
    g.release();
    expect(await moved).to.equal(2 * n);
    expect(await col.countDocuments()).to.equal(2 * n);
    expect(await db.collection(COLLECTIONS.webhookBatches).countDocuments(), 'the batch is gone once moved').to.equal(0);
  });

  it('batches move in the order they were appended, not by the acceptance order they hold (a retried job appends old writes later)', async () => {
    const outbox = createEventOutbox({ db, subscriptions: ONE_ENDPOINT, logger: silentLogger });
    const at = new Date();
    const ev = (type: StoredEvent['type'], seq: number, record: string): StoredEvent => ({ type, seq, recordId: record, subjectId: type === 'record.created' ? record : `resp_${record}_${seq}`, datasetId: 'ds', at, data: {} as never });
    // Round 1 stored rec_a's record at seq 500; round 2, appended after it, holds an old write
    // (seq 10, another record) and rec_a's next response at seq 600.
    await outbox.append([ev('record.created', 500, 'rec_a')]);
    await outbox.append([ev('record.created', 10, 'rec_old'), ev('response.created', 600, 'rec_a')]);
    const fanOut = createWebhookFanOut({ db, lock, logger: silentLogger });
    // One batch at a time: after the first move only round 1's event may be in the outbox.
    expect(await fanOut.move(ENDPOINT._id, 1)).to.equal(1);
    const col = db.collection<DeliveryDoc>(COLLECTIONS.webhookOutbox);
    expect((await col.find({}).toArray()).map((d) => d.event_type)).to.deep.equal(['record.created']);
    expect(await fanOut.move(ENDPOINT._id, 100)).to.equal(2);
    expect((await col.find({ key: 'rec_a' }).sort({ seq: 1 }).toArray()).map((d) => d.event_type)).to.deep.equal(['record.created', 'response.created']);
  });

  it('a fan-out waits while another process holds the lock (it moves nothing), and moves once it is free', async () => {
    await createEventOutbox({ db, subscriptions: ONE_ENDPOINT, logger: silentLogger }).append([{ type: 'record.created', seq: 7, recordId: 'rec_l', subjectId: 'rec_l', datasetId: 'ds', at: new Date(), data: {} as never }]);
    const fanOut = createWebhookFanOut({ db, lock, logger: silentLogger });
    const g = gate();
    const holder = lock.with(async () => {
      g.onHeld();
      await g.released;
    });
    await g.held;
    expect(await fanOut.move(ENDPOINT._id, 10)).to.equal(0);
    g.release();
    await holder;
    expect(await fanOut.move(ENDPOINT._id, 10)).to.equal(1);
  });

  it('two store rounds at once: the second round\'s events of a record wait for the first round\'s (its record.created is never dropped as older)', async () => {
    const g = gate();
    const held = holdingCall(db, COLLECTIONS.webhookBatches, 'insertMany', 1, g.onHeld, g.released);
    const outbox = createEventOutbox({ db: held, subscriptions: ONE_ENDPOINT, logger: silentLogger });
    const w = createFeedbackWriter({ db, logger: silentLogger, events: createRoundEvents({ db, outbox }) });
    // Round 1 stores record 1 and its first response; its events' append is held.
    const first = w.write([recordWrite(1)]);
    await g.held;
    // Round 2, in flight beside it: an annotator's response to the same record.
    const second = w.write([version(1, 1, 1)]);
    const record = recordWrite(1).write.record_id;
    const batches = db.collection<BatchDoc>(COLLECTIONS.webhookBatches);
    const deadline = Date.now() + 1_500;
    while (Date.now() < deadline) {
      // Without the turn, round 2's response.created is here while record.created waits: the dispatcher would send it and drop record.created.
      expect((await batches.find({}).toArray()).flatMap(decodeBatch).filter((e) => e.key === record), 'events of the record visible before the first round appended its own').to.deep.equal([]);
      await new Promise((r) => setTimeout(r, 50));
    }
    g.release();
    expect((await first)[0]!.kind).to.equal('stored');
    expect((await second)[0]!.kind).to.equal('stored');
    // Moved one batch at a time, in their order: each move leaves the record's events a prefix of them.
    const fanOut = createWebhookFanOut({ db, lock, logger: silentLogger });
    const col = db.collection<DeliveryDoc>(COLLECTIONS.webhookOutbox);
    const seen: string[][] = [];
    while ((await fanOut.move(ENDPOINT._id, 1)) > 0) seen.push((await col.find({ key: record }).sort({ seq: 1, rank: 1 }).toArray()).map((e) => e.event_type));
    expect(seen).to.deep.equal([['record.created', 'response.created'], ['record.created', 'response.created', 'response.created']]);
    const events = await col.find({ key: record }).sort({ seq: 1, rank: 1 }).toArray();
    expect(events.map((e) => e.event_type)).to.deep.equal(['record.created', 'response.created', 'response.created']);
  });

  it('an erasure while a fan-out is copying a batch out: the erased response\'s event reaches neither the outbox nor a batch', async () => {
    const at = new Date();
    await createEventOutbox({ db, subscriptions: ONE_ENDPOINT, logger: silentLogger }).append([
      { type: 'record.created', seq: 20, recordId: 'rec_e', subjectId: 'rec_e', datasetId: 'ds', at, data: {} as never },
      { type: 'response.created', seq: 20, recordId: 'rec_e', subjectId: 'resp_e', datasetId: 'ds', at, data: {} as never },
    ]);
    // The fan-out has read the batch and its insert into the outbox is held.
    const g = gate();
    const fanOut = createWebhookFanOut({ db: holdingCall(db, COLLECTIONS.webhookOutbox, 'insertMany', 1, g.onHeld, g.released), lock, logger: silentLogger });
    const moving = fanOut.move(ENDPOINT._id, 10);
    await g.held;
    const erased = { doc: { _id: 'resp_e', feedback_record_id: 'rec_e' }, erasure: { seq: Number.MAX_SAFE_INTEGER } } as unknown as ErasedResponse;
    const erasing = createOutboxEraser(db, lock).responses([erased]);
    // The eraser waits for the fan-out's lock; let the copy finish a moment later.
    await new Promise((r) => setTimeout(r, 300));
    g.release();
    await Promise.all([moving, erasing]);
    const outbox = await db.collection<DeliveryDoc>(COLLECTIONS.webhookOutbox).find({}).toArray();
    const batched = (await db.collection<BatchDoc>(COLLECTIONS.webhookBatches).find({}).toArray()).flatMap(decodeBatch);
    expect([...outbox, ...batched].map((e) => e.event_type), 'only the record\'s own event is left').to.deep.equal(['record.created']);
  });

  it('an erasure takes the events of the versions below its order only: a version accepted after it, stored while the older one was being removed, keeps its event', async () => {
    const outbox = createEventOutbox({ db, subscriptions: ONE_ENDPOINT, logger: silentLogger });
    const doc = (seq: number, values: Record<string, unknown>) => ({ _id: 'rsp_kept', feedback_record_id: 'rec_kept', feedback_dataset_id: 'ds_kept', user_id: 'ivy', status: 'submitted', values, seq, created_seq: 100, created_at: new Date(1), updated_at: new Date(seq) }) as unknown as ResponseDoc;
    // The version below the erasure (order 150) and one accepted after it (order 200): one in a batch, one in the outbox.
    await outbox.append([responseEvent(doc(100, { v: 'erased' }), 100)]);
    await createWebhookFanOut({ db, lock, logger: silentLogger }).move(ENDPOINT._id, 10);
    await outbox.append([responseEvent(doc(200, { v: 'kept' }), 200)]);
    const erased = { doc: doc(100, { v: 'erased' }), erasure: { id: 'era_x', seq: 150, at: new Date() } } satisfies ErasedResponse;
    await createOutboxEraser(db, lock).responses([erased]);
    const inOutbox = await db.collection<DeliveryDoc>(COLLECTIONS.webhookOutbox).find({ subject_id: 'rsp_kept' }).toArray();
    const inBatches = (await db.collection<BatchDoc>(COLLECTIONS.webhookBatches).find({}).toArray()).flatMap(decodeBatch).filter((e) => e.subject_id === 'rsp_kept');
    expect([...inOutbox, ...inBatches].map((e) => e.seq), 'only the version accepted after the erasure').to.deep.equal([200]);
    // And the other way round: the erased version still in a batch, the kept one already in the outbox.
    await db.collection(COLLECTIONS.webhookOutbox).deleteMany({});
    await db.collection(COLLECTIONS.webhookBatches).deleteMany({});
    const other = (seq: number) => ({ ...doc(seq, { v: seq }), _id: 'rsp_kept2' }) as ResponseDoc;
    await outbox.append([responseEvent(other(300), 300)]);
    await createWebhookFanOut({ db, lock, logger: silentLogger }).move(ENDPOINT._id, 10);
    await outbox.append([responseEvent(other(250), 250)]);
    await createOutboxEraser(db, lock).responses([{ doc: other(250), erasure: { id: 'era_y', seq: 260, at: new Date() } }]);
    const left = [...(await db.collection<DeliveryDoc>(COLLECTIONS.webhookOutbox).find({ subject_id: 'rsp_kept2' }).toArray()), ...(await db.collection<BatchDoc>(COLLECTIONS.webhookBatches).find({}).toArray()).flatMap(decodeBatch).filter((e) => e.subject_id === 'rsp_kept2')];
    expect(left.map((e) => e.seq)).to.deep.equal([300]);
  });

  it('an erasure of a response appended inside its record\'s write line: the line is split, the record keeps its event, nothing of the response stays in any batch', async () => {
    const write = (n: number, user: string) => {
      const item = recordWrite(n) as SequencedWrite & { write: RecordWrite };
      return { ...item, write: { ...item.write, response: { ...item.write.response, user_id: user, values: { secret: `values-of-${user}-${n}` } } } };
    };
    const erasedItem = write(1, 'erased-user');
    const otherItem = write(2, 'other-user');
    const both = ['record.created', 'response.created'] as const;
    await createEventOutbox({ db, subscriptions: ONE_ENDPOINT, logger: silentLogger }).append([erasedItem, otherItem].map((i) => ({ write: i.write, seq: i.seq, status: 'submitted', types: both })));
    const stored = async () => {
      const docs = await db.collection<BatchDoc>(COLLECTIONS.webhookBatches).find({}).toArray();
      return { n: docs.reduce((t, d) => t + d.n, 0), lines: docs.flatMap(batchLines), events: docs.flatMap(decodeBatch) };
    };
    const before = await stored();
    expect(before.lines, 'each record write is one line of the batch').to.have.length(2);
    expect(before.n).to.equal(4);
    const erased = { doc: { _id: erasedItem.write.response_id, feedback_record_id: erasedItem.write.record_id }, erasure: { seq: Number.MAX_SAFE_INTEGER } } as unknown as ErasedResponse;
    await createOutboxEraser(db, lock).responses([erased]);
    const after = await stored();
    expect(after.events.map((e) => [e.event_type, e.subject_id])).to.deep.equal([
      ['record.created', erasedItem.write.record_id],
      ['record.created', otherItem.write.record_id],
      ['response.created', otherItem.write.response_id],
    ]);
    expect(after.n, 'the batch counts the events it holds now').to.equal(3);
    expect(after.lines.join('\n'), 'the erased response\'s values are in no batch').to.not.include('values-of-erased-user');
    // The record's own erasure then takes its event; the other write is untouched.
    await createOutboxEraser(db, lock).records([erasedItem.write.record_id]);
    expect((await stored()).events.map((e) => e.subject_id)).to.deep.equal([otherItem.write.record_id, otherItem.write.response_id]);
    expect((await stored()).lines.at(-1), 'a line without a match is kept as it was').to.equal(before.lines[1]);
  });

  it('the admin API counts events still in their batches as pending, and deleting the endpoint deletes its batches too', async () => {
    const admin = createWebhookAdmin({ db });
    const created = await admin.create({ url: 'http://127.0.0.1:9/hook', events: ['record.created'] });
    const mine = { ...ENDPOINT, _id: created.id };
    const subscriptions = { ...ONE_ENDPOINT, matching: () => [mine], all: () => [mine] } as WebhookSubscriptions;
    const at = new Date();
    await createEventOutbox({ db, subscriptions, logger: silentLogger }).append(Array.from({ length: 3 }, (_, i): StoredEvent => ({ type: 'record.created', seq: 100 + i, recordId: `rec_c${i}`, subjectId: `rec_c${i}`, datasetId: 'ds', at, data: {} as never })));
    const pending = async () => (await admin.list()).items.find((e) => e.id === created.id)!.deliveries.pending;
    expect(await pending(), 'three events, none moved yet').to.equal(3);
    expect(await createWebhookFanOut({ db, lock, logger: silentLogger }).move(created.id, 1)).to.equal(3);
    expect(await pending(), 'the same three, now in the outbox').to.equal(3);
    await createEventOutbox({ db, subscriptions, logger: silentLogger }).append([{ type: 'record.created', seq: 200, recordId: 'rec_c9', subjectId: 'rec_c9', datasetId: 'ds', at, data: {} as never }]);
    expect(await pending()).to.equal(4);
    expect(await admin.remove(created.id)).to.equal(true);
    expect(await db.collection(COLLECTIONS.webhookBatches).countDocuments({ endpoint_id: created.id })).to.equal(0);
    expect(await db.collection(COLLECTIONS.webhookOutbox).countDocuments({ endpoint_id: created.id })).to.equal(0);
  });

  it('events appended or moved for an endpoint after it was deleted (a worker with an older list of endpoints) are deleted by the prune; a live endpoint\'s are kept', async () => {
    const admin = createWebhookAdmin({ db });
    const created = await admin.create({ url: 'http://127.0.0.1:9/hook', events: ['record.created'] });
    const live = { ...ENDPOINT, _id: created.id };
    const gone = { ...ENDPOINT, _id: 'wh_deleted_since' };
    // The worker's list still holds the deleted endpoint.
    const stale = { ...ONE_ENDPOINT, matching: () => [live, gone], all: () => [live, gone] } as WebhookSubscriptions;
    const at = new Date();
    const append = (seq: number) => createEventOutbox({ db, subscriptions: stale, logger: silentLogger }).append([{ type: 'record.created', seq, recordId: `rec_o${seq}`, subjectId: `rec_o${seq}`, datasetId: 'ds', at, data: {} as never }]);
    await append(300);
    const fanOut = createWebhookFanOut({ db, lock, logger: silentLogger });
    expect(await fanOut.move(gone._id, 1), 'moved into the outbox by the stale worker').to.equal(1);
    expect(await fanOut.move(live._id, 1)).to.equal(1);
    const count = async (endpointId: string) => [await db.collection(COLLECTIONS.webhookBatches).countDocuments({ endpoint_id: endpointId }), await db.collection(COLLECTIONS.webhookOutbox).countDocuments({ endpoint_id: endpointId })];
    expect(await count(gone._id), 'a delivery only, no batch').to.deep.equal([0, 1]);
    expect(await pruneOrphanedEvents(db)).to.deep.equal([gone._id]);
    expect(await count(gone._id)).to.deep.equal([0, 0]);
    await append(301);
    expect(await count(gone._id), 'a batch only').to.deep.equal([1, 0]);
    expect(await pruneOrphanedEvents(db)).to.deep.equal([gone._id]);
    expect(await count(gone._id), 'nothing left for the deleted endpoint').to.deep.equal([0, 0]);
    expect(await count(live._id), 'the live endpoint keeps its batch and its delivery').to.deep.equal([1, 1]);
    expect(await pruneOrphanedEvents(db), 'nothing more to prune').to.deep.equal([]);
    await admin.remove(created.id);
  });
});
