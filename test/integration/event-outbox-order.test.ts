import { expect } from 'chai';
import { MongoClient, type Db } from 'mongodb';
import { COLLECTIONS, mongoClientOptions } from '../../shared/mongo.js';
import type { WebhookEndpointDoc } from '../../shared/webhook-admin.js';
import type { DeliveryDoc } from '../../shared/webhook-outbox.js';
import type { StoredEvent } from '../../shared/webhook-events.js';
import { createEventOutbox } from '../../worker/event-outbox.js';
import { ensureIndexes } from '../../worker/indexes.js';
import { createRoundEvents } from '../../worker/round-events.js';
import { createFeedbackWriter } from '../../worker/writer.js';
import { STORE_CHUNK_DOCS } from '../../worker/store-chunks.js';
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
  let db: Db;
  before(async () => {
    client = new MongoClient(sharedServices().mongoUrl, mongoClientOptions());
    db = client.db(uniqueName('outbox_order').replace(/-/g, '_'));
    await ensureIndexes(db);
  });
  after(async () => {
    await db.dropDatabase().catch(() => undefined);
    await client.close();
  });

  it('more events than one store command holds: while the first command is held, no record shows a later event without its earlier one', async () => {
    // As a round builds them: every record.created first, then the records' first responses.
    const n = Math.ceil(STORE_CHUNK_DOCS * 0.6);
    const at = new Date();
    const records: StoredEvent[] = Array.from({ length: n }, (_, i) => ({ type: 'record.created', seq: 1000 + i, recordId: `rec_${i}`, subjectId: `rec_${i}`, datasetId: 'ds', at, data: { feedback_record_id: `rec_${i}` } as never }));
    const responses: StoredEvent[] = Array.from({ length: n }, (_, i) => ({ type: 'response.created', seq: 1000 + i, recordId: `rec_${i}`, subjectId: `resp_${i}`, datasetId: 'ds', at, data: { feedback_response_id: `resp_${i}` } as never }));
    const g = gate();
    const outbox = createEventOutbox({ db: holdingCall(db, COLLECTIONS.webhookOutbox, 'insertMany', 1, g.onHeld, g.released), subscriptions: ONE_ENDPOINT, logger: silentLogger });
    const appended = outbox.append([...records, ...responses]);
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
    await appended;
    expect(await col.countDocuments()).to.equal(2 * n);
  });

  it('two store rounds at once: the second round\'s events of a record wait for the first round\'s (its record.created is never dropped as older)', async () => {
    await db.collection(COLLECTIONS.webhookOutbox).deleteMany({});
    const g = gate();
    const held = holdingCall(db, COLLECTIONS.webhookOutbox, 'insertMany', 1, g.onHeld, g.released);
    const outbox = createEventOutbox({ db: held, subscriptions: ONE_ENDPOINT, logger: silentLogger });
    const w = createFeedbackWriter({ db, logger: silentLogger, events: createRoundEvents({ db, outbox }) });
    // Round 1 stores record 1 and its first response; its events' append is held.
    const first = w.write([recordWrite(1)]);
    await g.held;
    // Round 2, in flight beside it: an annotator's response to the same record.
    const second = w.write([version(1, 1, 1)]);
    const record = recordWrite(1).write.record_id;
    const col = db.collection<DeliveryDoc>(COLLECTIONS.webhookOutbox);
    const deadline = Date.now() + 1_500;
    while (Date.now() < deadline) {
      // Without the turn, round 2's response.created is here while record.created waits: the dispatcher would send it and drop record.created.
      expect(await col.countDocuments({ key: record }), 'events of the record visible before the first round appended its own').to.equal(0);
      await new Promise((r) => setTimeout(r, 50));
    }
    g.release();
    expect((await first)[0]!.kind).to.equal('stored');
    expect((await second)[0]!.kind).to.equal('stored');
    const events = await col.find({ key: record }).sort({ seq: 1, rank: 1 }).toArray();
    expect(events.map((e) => e.event_type)).to.deep.equal(['record.created', 'response.created', 'response.created']);
  });
});
