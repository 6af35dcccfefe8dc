import { expect } from 'chai';
import { MongoClient, type Db } from 'mongodb';
import { COLLECTIONS, mongoClientOptions } from '../../shared/mongo.js';
import type { WebhookEndpointDoc } from '../../shared/webhook-admin.js';
import type { DeliveryDoc } from '../../shared/webhook-outbox.js';
import type { StoredEvent } from '../../shared/webhook-events.js';
import { createEventOutbox } from '../../worker/event-outbox.js';
import { STORE_CHUNK_DOCS } from '../../worker/store-chunks.js';
import type { WebhookSubscriptions } from '../../worker/webhook-subscriptions.js';
import { uniqueName } from '../helpers/env.js';
import { gate, holdingCall } from '../helpers/held-calls.js';
import { sharedServices } from '../helpers/root-hooks.js';
import { silentLogger } from '../helpers/stack.js';

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
});
