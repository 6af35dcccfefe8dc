import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { MAX_WEBHOOK_ENDPOINTS } from '../../shared/webhook-admin.js';
import { testConfig } from '../helpers/env.js';
import { eventually, startStack, type Stack } from '../helpers/stack.js';
import { startWebhookReceiver } from '../helpers/webhook-receiver.js';
import { adminRequest, deduped, record, subscribeTo, WEBHOOK_ENV } from '../helpers/webhook-stack.js';

/*
 * Webhooks on a stack of their own (WEBHOOK_MAX_ATTEMPTS=2): deliveries that fail for good and
 * the events they hold back, an endpoint's deletion under traffic, the endpoint limit. Split from
 * webhooks.test.ts, which holds the admin API and the deliveries that succeed.
 */

describe('webhooks: deliveries that fail for good', function () {
  this.timeout(60_000);
  let stack: Stack;
  before(async () => {
    stack = await startStack(testConfig({ ...WEBHOOK_ENV, WEBHOOK_MAX_ATTEMPTS: '2' }));
  });
  after(async () => {
    await stack?.close();
  });

  it('are failed and hold the record\'s later events, visible per endpoint, and a replay sends them all in order', async () => {
    const receiver = await startWebhookReceiver();
    const admin = (path: string, method = 'GET', body?: unknown) => adminRequest(stack, path, method, body);
    try {
      receiver.answer = () => 503;
      const created = await admin('/admin/webhooks', 'POST', { url: receiver.url, events: ['record.created', 'response.created', 'response.updated'] });
      await stack.worker!.webhooks.subscriptions.refresh();
      const res = await stack.post('/feedback-record', { record: { feedback_dataset_id: 'ds_fail', field_to_value: { q: 'x' } }, response: { values: { v: 1 }, user_id: 'u' } });
      const recordId = res.body.feedback_record_id as string;
      const failed = await eventually(async () => {
        const page = await admin(`/admin/webhooks/${created.body.id}/deliveries?status=failed`);
        return page.body.items.length === 1 ? page.body.items : undefined;
      }, 30_000, 'a failed delivery');
      expect(failed[0]).to.include({ event_type: 'record.created', feedback_record_id: recordId, attempts: 2, last_status: 503 });
      // The record's first response waits behind it; an update of it too.
      await stack.post('/feedback-response', { feedback_record_id: recordId, response: { status: 'submitted', values: { v: 2 }, user_id: 'u' } });
      await eventually(async () => {
        const list = await admin('/admin/webhooks');
        const d = list.body.items[0].deliveries;
        return d.failed === 1 && d.held === 2 ? true : undefined;
      }, 30_000, 'the later events held');
      const before = receiver.received.length;
      await new Promise((r) => setTimeout(r, 500));
      expect(receiver.received.length, 'nothing sent for a held record').to.equal(before);

      receiver.answer = () => 200;
      const replay = await admin(`/admin/webhooks/${created.body.id}/replay`, 'POST');
      expect(replay.body).to.deep.equal({ endpoint_id: created.body.id, replayed: 3 });
      await eventually(async () => (deduped(receiver).length === 3 ? true : undefined), 30_000, 'the replayed events');
      expect(deduped(receiver).map((e) => e.type)).to.deep.equal(['record.created', 'response.created', 'response.updated']);
    } finally {
      await receiver.close();
    }
  });
  it('DELETE stops the deliveries: no more than the POSTs in flight, and those started within ENDPOINT_CHECK_MS, arrive after its 200', async () => {
    // A slow endpoint (200 ms an answer), so that deliveries queue behind WEBHOOK_CONCURRENCY (8) in flight.
    const arrivals: number[] = [];
    const server = createServer((req, res) => {
      arrivals.push(Date.now());
      req.resume();
      req.on('end', () => setTimeout(() => res.writeHead(200).end('ok'), 200));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { id } = await subscribeTo(stack, `http://127.0.0.1:${(server.address() as AddressInfo).port}/slow`, ['ds_delete'], ['record.created']);
      for (let i = 0; i < 300; i += 50) {
        const answers = await Promise.all(Array.from({ length: 50 }, (_, k) => stack.post('/feedback-record', record('ds_delete', i + k))));
        expect(answers.map((a) => a.status)).to.deep.equal(Array(50).fill(200));
      }
      await eventually(async () => (arrivals.length >= 20 ? true : undefined), 60_000, 'deliveries flowing');
      const deleted = await adminRequest(stack, `/admin/webhooks/${id}`, 'DELETE');
      expect(deleted.status).to.equal(200);
      const atDelete = arrivals.length;
      // Until no delivery arrived for 1.5 s (bounded).
      await eventually(async () => (Date.now() - (arrivals.at(-1) ?? 0) > 1_500 ? true : undefined), 60_000, 'deliveries stopped');
      expect(arrivals.length - atDelete, `${arrivals.length} deliveries in all, ${atDelete} before the DELETE`).to.be.at.most(3 * 8);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
  it('refuses an endpoint beyond MAX_WEBHOOK_ENDPOINTS with 400 validation_failed and its details', async () => {
    const listed = await adminRequest(stack, '/admin/webhooks');
    const created: string[] = [];
    for (let n = listed.body.items.length; n < MAX_WEBHOOK_ENDPOINTS; n++) {
      const res = await adminRequest(stack, '/admin/webhooks', 'POST', { url: `http://127.0.0.1:9/e${n}`, events: ['record.created'] });
      expect(res.status).to.equal(201);
      created.push(res.body.id as string);
    }
    try {
      const refused = await adminRequest(stack, '/admin/webhooks', 'POST', { url: 'http://127.0.0.1:9/one-more', events: ['record.created'] });
      expect(refused.status).to.equal(400);
      expect(refused.body.error.code).to.equal('validation_failed');
      expect(refused.body.error.details).to.be.an('array').with.length(1);
    } finally {
      for (const id of created) await adminRequest(stack, `/admin/webhooks/${id}`, 'DELETE');
    }
  });
});
