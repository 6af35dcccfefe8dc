// Deliveries the worker finds half done when it starts: an outbox written by an earlier release,
// and deliveries left in flight without a job (a lost lease, a job Redis lost).
import { expect } from 'chai';
import { Redis } from 'ioredis';
import { COLLECTIONS } from '../../shared/mongo.js';
import { pendingOrder, recordKey, type DeliveryDoc } from '../../shared/webhook-outbox.js';
import { webhookLeaseKey } from '../../shared/redis-keys.js';
import { testConfig } from '../helpers/env.js';
import { eventually, startStack, type Stack } from '../helpers/stack.js';
import { startWebhookReceiver } from '../helpers/webhook-receiver.js';
import { adminRequest, deduped, subscribeTo, WEBHOOK_ENV } from '../helpers/webhook-stack.js';

describe('webhooks: an outbox written by an earlier release', function () {
  this.timeout(60_000);
  let stack: Stack;
  before(async () => {
    stack = await startStack(testConfig({ ...WEBHOOK_ENV }), { worker: false });
  });
  after(async () => {
    await stack?.close();
  });

  it('gets the single-field keys and loses the compound indexes as the worker starts; its pending delivery is then sent', async () => {
    const receiver = await startWebhookReceiver();
    try {
      const created = await adminRequest(stack, '/admin/webhooks', 'POST', { url: receiver.url, events: ['record.created'] });
      expect(created.status, created.text).to.equal(201);
      const endpointId = created.body.id as string;
      const outbox = stack.db.collection<DeliveryDoc>(COLLECTIONS.webhookOutbox);
      // As the previous release left it: its compound indexes, and a pending delivery without k/q.
      await outbox.createIndex({ endpoint_id: 1, status: 1, seq: 1, rank: 1 }, { name: 'endpoint_status_seq' });
      await outbox.createIndex({ endpoint_id: 1, key: 1, status: 1, seq: 1 }, { name: 'endpoint_key_status' });
      const eventId = 'evt_record_created_rec_old_1_64';
      const body = JSON.stringify({ type: 'record.created', timestamp: new Date(0).toISOString(), data: { feedback_record_id: 'rec_old_1' } });
      const now = new Date();
      const old = { _id: `${endpointId}.${eventId}`, endpoint_id: endpointId, event_id: eventId, event_type: 'record.created' as const, key: 'rec_old_1', subject_id: 'rec_old_1', seq: 64, rank: 0, dataset_id: 'ds_old', body, status: 'pending' as const, attempts: 0, created_at: now, updated_at: now };
      await stack.db.collection<Omit<DeliveryDoc, 'k'>>(COLLECTIONS.webhookOutbox).insertOne(old);

      await stack.startWorker();
      const names = (await outbox.listIndexes().toArray()).map((i) => String(i['name']));
      expect(names).to.not.include.members(['endpoint_status_seq', 'endpoint_key_status']);
      expect(names).to.include.members(['endpoint_record', 'pending_order', 'in_flight']);
      await eventually(async () => (deduped(receiver).length === 1 ? true : undefined), 20_000, 'the old delivery sent');
      expect(receiver.received[0]!.body).to.equal(body);
      expect(deduped(receiver)[0]!.id).to.equal(eventId);
      await eventually(async () => ((await outbox.findOne({ _id: old._id }))?.status === 'delivered' ? true : undefined), 5_000, 'delivered');
    } finally {
      await receiver.close();
    }
  });
});

describe('webhooks: deliveries left in flight without a job', function () {
  this.timeout(90_000);
  let stack: Stack;
  before(async () => {
    stack = await startStack(testConfig({ ...WEBHOOK_ENV }));
  });
  after(async () => {
    await stack?.close();
  });

  it('a lease whose job never reached Redis, and a delivery marked queued by the previous release whose job is gone, are both sent after the reconcile interval', async () => {
    const receiver = await startWebhookReceiver();
    try {
      const endpoint = await subscribeTo(stack, receiver.url, ['ds_lost'], ['record.created']);
      const outbox = stack.db.collection<DeliveryDoc>(COLLECTIONS.webhookOutbox);
      const long = new Date(Date.now() - 120_000);
      const delivery = (record: string, seq: number): DeliveryDoc => {
        const eventId = `evt_record_created_${record}_${seq}`;
        const body = JSON.stringify({ type: 'record.created', timestamp: long.toISOString(), data: { feedback_record_id: record } });
        return { _id: `${endpoint.id}.${eventId}`, endpoint_id: endpoint.id, event_id: eventId, event_type: 'record.created', key: record, k: recordKey(endpoint.id, record), subject_id: record, seq, rank: 0, dataset_id: 'ds_lost', body, status: 'pending', attempts: 0, created_at: long, updated_at: long };
      };
      // A dispatcher pass that took its lease and died before queueing the job.
      const leased = delivery('rec_lost_lease', 71);
      const redis = new Redis(stack.config.redisUrl);
      try {
        await redis.hset(webhookLeaseKey(stack.config, endpoint.id), leased.key, JSON.stringify([`${endpoint.id}.deadpass`, leased._id, long.getTime()]));
      } finally {
        redis.disconnect();
      }
      await outbox.insertOne({ ...leased, q: pendingOrder(endpoint.id, leased.seq, leased.rank) });
      // The previous release's state for a delivery in flight, whose job Redis lost.
      const legacy = delivery('rec_lost_job', 72);
      await outbox.insertOne({ ...legacy, status: 'queued', f: endpoint.id, claim: `${endpoint.id}.lostjob` });
      await new Promise((r) => setTimeout(r, 1_000));
      expect(deduped(receiver), 'held back while leased / queued').to.have.length(0);
      await eventually(async () => (deduped(receiver).length === 2 ? true : undefined), 60_000, 'both sent');
      expect(deduped(receiver).map((e) => e.id).sort()).to.deep.equal([leased.event_id, legacy.event_id].sort());
      await eventually(async () => ((await outbox.countDocuments({ _id: { $in: [leased._id, legacy._id] }, status: 'delivered' })) === 2 ? true : undefined), 5_000, 'delivered');
    } finally {
      await receiver.close();
    }
  });
});
