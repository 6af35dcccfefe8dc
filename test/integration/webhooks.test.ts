import { expect } from 'chai';
import { Webhook } from 'standardwebhooks';
import * as v from 'valibot';
import { createFeedbackClient } from '../../client/index.js';
import { WebhookPing } from '../../api/routes/webhooks.js';
import { DeliveriesReplayed, DeliveryList, WebhookEndpointCreated, WebhookEndpointList } from '../../shared/webhook-admin.js';
import { createIdMinter } from '../../shared/ids.js';
import { COLLECTIONS } from '../../shared/mongo.js';
import type { DeliveryDoc } from '../../shared/webhook-outbox.js';
import { testConfig, TEST_KEY } from '../helpers/env.js';
import { deadLetters, eventually, startStack, type HttpResult, type Stack } from '../helpers/stack.js';
import { startWebhookReceiver, type ReceivedWebhook, type WebhookReceiver } from '../helpers/webhook-receiver.js';
import { ADMIN, adminRequest, deduped, eventOf, record, recordOf, subscribeTo, WEBHOOK_ENV } from '../helpers/webhook-stack.js';

describe('webhooks', function () {
  this.timeout(120_000);
  let stack: Stack;
  const admin = (path: string, method = 'GET', body?: unknown): Promise<HttpResult> => adminRequest(stack, path, method, body);
  const subscribe = (url: string, datasets: string[], events = ['record.created', 'response.created', 'response.updated']) => subscribeTo(stack, url, datasets, events);
  const respond = (recordId: string, user: string, value: number) => stack.post('/feedback-response', { feedback_record_id: recordId, response: { status: 'submitted', values: { helpful: value }, user_id: user } });
  const outbox = () => stack.db.collection<DeliveryDoc>(COLLECTIONS.webhookOutbox);

  before(async () => {
    stack = await startStack(testConfig({ ...WEBHOOK_ENV, JOB_ATTEMPTS: '2' }));
  });
  after(async () => {
    await stack?.close();
  });

  describe('/admin/webhooks', () => {
    let receiver: WebhookReceiver;
    before(async () => {
      receiver = await startWebhookReceiver();
    });
    after(async () => receiver.close());

    it('creates (201, secret once), lists without secrets, pings signed, deletes; refuses bad input and non-admin keys', async () => {
      const created = await admin('/admin/webhooks', 'POST', { url: receiver.url, events: ['response.created'], datasets: ['ds_admin'] });
      expect(created.status).to.equal(201);
      expect(created.body.id).to.match(/^wh_/);
      expect(created.body.secret).to.match(/^whsec_[A-Za-z0-9+/]+=*$/);
      expect(created.headers.get('cache-control')).to.equal('no-store');

      const list = await admin('/admin/webhooks');
      expect(list.status).to.equal(200);
      const item = list.body.items.find((i: { id: string }) => i.id === created.body.id);
      expect(item).to.include({ url: receiver.url });
      expect(item).to.not.have.property('secret');
      expect(item.deliveries).to.deep.equal({ pending: 0, queued: 0, delivered: 0, failed: 0, held: 0, superseded: 0 });

      const ping = await admin(`/admin/webhooks/${created.body.id}/test`, 'POST');
      expect(ping.status).to.equal(200);
      expect(ping.body).to.include({ delivered: true, status: 200, error: null });
      const got = receiver.received.at(-1)!;
      expect(got.headers['webhook-id']).to.equal(ping.body.event_id);
      const verified = new Webhook(created.body.secret).verify(got.body, got.headers as Record<string, string>) as { type: string };
      expect(verified.type).to.equal('webhook.ping');

      for (const [body, path] of [
        [{ url: 'ftp://example.com/x', events: ['response.created'] }, 'url'],
        [{ url: receiver.url, events: [] }, 'events'],
        [{ url: receiver.url, events: ['response.deleted'] }, 'events[0]'],
        [{ url: receiver.url, events: ['response.created'], colour: 'red' }, 'colour'],
        [[], 'body'],
        [{ url: receiver.url, events: 'response.created' }, 'events'],
      ] as const) {
        const res = await admin('/admin/webhooks', 'POST', body);
        expect(res.status, JSON.stringify(body)).to.equal(400);
        expect(res.body.error.code).to.equal('validation_failed');
        expect(res.body.error.details.map((d: { path: string }) => d.path)).to.include(path);
        // Messages in the house style, not the validation library's ("Invalid type: …").
        for (const d of res.body.error.details as { message: string }[]) expect(d.message, JSON.stringify(body)).to.not.match(/^Invalid /);
      }
      // A URL with spaces around it: refused, not stored as something else than what is used.
      const spaced = await admin('/admin/webhooks', 'POST', { url: ` ${receiver.url}\t`, events: ['response.created'] });
      expect(spaced.status, spaced.text).to.equal(400);
      expect(spaced.body.error.details).to.deep.include({ path: 'url', message: 'must not have spaces around it' });
      const notAdmin = await stack.request('/admin/webhooks', { headers: { Authorization: `Bearer ${TEST_KEY.secret}` } });
      expect(notAdmin.status).to.equal(403);
      expect((await admin('/admin/webhooks/wh_nope', 'DELETE')).status).to.equal(404);
      expect((await admin('/admin/webhooks/wh_nope/test', 'POST')).status).to.equal(404);

      const doc = (await stack.request('/openapi.json', {})).body;
      for (const path of ['/admin/webhooks', '/admin/webhooks/{id}', '/admin/webhooks/{id}/test', '/admin/webhooks/{id}/deliveries', '/admin/webhooks/{id}/replay']) expect(doc.paths, path).to.have.property(path);
      v.parse(WebhookEndpointCreated, created.body);
      v.parse(WebhookEndpointList, list.body);
      v.parse(WebhookPing, ping.body);

      const deleted = await admin(`/admin/webhooks/${created.body.id}`, 'DELETE');
      expect(deleted.body).to.deep.equal({ id: created.body.id, deleted: true });
      expect((await admin('/admin/webhooks')).body.items.map((i: { id: string }) => i.id)).to.not.include(created.body.id);
    });
  });

  it('the typed client manages endpoints: create, list, ping, deliveries, replay, delete', async () => {
    const receiver = await startWebhookReceiver();
    try {
      const client = createFeedbackClient({ baseUrl: stack.baseUrl, apiKey: ADMIN.secret });
      const created = await client.createWebhook({ url: receiver.url, events: ['record.created'], datasets: ['ds_client'] });
      expect(created.secret).to.match(/^whsec_/);
      expect((await client.listWebhooks()).items.map((i) => i.id)).to.include(created.id);
      expect(await client.testWebhook(created.id)).to.include({ delivered: true, status: 200 });
      await stack.worker!.webhooks.subscriptions.refresh();
      await stack.post('/feedback-record', record('ds_client', 1));
      const page = await eventually(async () => {
        const p = await client.listWebhookDeliveries(created.id, { status: 'delivered' });
        return p.items.length === 1 ? p : undefined;
      }, 20_000, 'a delivered event');
      v.parse(DeliveryList, page);
      expect(page.items[0]).to.include({ event_type: 'record.created', attempts: 1, last_status: 200 });
      v.parse(DeliveriesReplayed, await client.replayWebhookDeliveries(created.id));
      expect(await client.deleteWebhook(created.id)).to.deep.equal({ id: created.id, deleted: true });
      const gone = await client.testWebhook(created.id).catch((err: unknown) => err as { code: string; status: number });
      expect(gone).to.include({ code: 'not_found', status: 404 });
    } finally {
      await receiver.close();
    }
  });

  it('every stored write of a burst arrives exactly once after dedupe by webhook-id, signed, showing the stored document as the read API does', async () => {
    const receiver = await startWebhookReceiver();
    try {
      const { secret } = await subscribe(receiver.url, ['ds_burst']);
      // Records with their first responses, in one burst of concurrent batches: 800 events, more
      // than one store command of the outbox holds (STORE_CHUNK_DOCS), so a round appends them in several.
      const n = 400;
      const batches = await Promise.all(
        Array.from({ length: 8 }, (_, b) => stack.post('/feedback-batch', { items: Array.from({ length: n / 8 }, (_, i) => record('ds_burst', (b * n) / 8 + i)) })),
      );
      const ids = batches.flatMap((res) => (res.body.items as { result: { feedback_record_id: string; feedback_response_id: string } }[]).map((i) => i.result));
      expect(ids).to.have.length(n);
      await eventually(async () => ((await stack.db.collection(COLLECTIONS.responses).countDocuments({ feedback_dataset_id: 'ds_burst' })) === n ? true : undefined), 30_000, 'the records stored');
      // Then a burst of one update per response of the first 40, and a second annotator on the last 30.
      const second = await Promise.all([...ids.slice(0, 40).map((r) => respond(r.feedback_record_id, 'ann-1', 9)), ...ids.slice(n - 30).map((r) => respond(r.feedback_record_id, 'ann-2', 7))]);
      expect(second.every((r) => r.status === 200)).to.equal(true);
      const expected = n + n + 40 + 30;
      const events = await eventually(async () => (deduped(receiver).length >= expected ? deduped(receiver) : undefined), 60_000, `${expected} events`).catch(async (err: Error) => {
        const outbox = await stack.db.collection(COLLECTIONS.webhookOutbox).aggregate([{ $group: { _id: '$status', n: { $sum: 1 } } }]).toArray();
        throw new Error(`${err.message}: ${deduped(receiver).length} received; outbox by status ${JSON.stringify(outbox)}`);
      });
      await new Promise((r) => setTimeout(r, 500));
      expect(deduped(receiver)).to.have.length(expected);
      const count = (type: string) => events.filter((e) => e.type === type).length;
      expect({ records: count('record.created'), created: count('response.created'), updated: count('response.updated') }).to.deep.equal({ records: n, created: n + 30, updated: 40 });
      // No event was dropped as older than one of its record delivered before it.
      expect(await stack.db.collection(COLLECTIONS.webhookOutbox).countDocuments({ status: 'superseded' })).to.equal(0);
      for (const r of receiver.received) new Webhook(secret).verify(r.body, r.headers as Record<string, string>);

      // The data is what the read API shows: for each record, its last events equal GET /feedback-record/{id}.
      for (const { feedback_record_id: id } of [ids[0]!, ids[75]!]) {
        const view = (await admin(`/feedback-record/${id}`)).body;
        const mine = events.filter((e) => recordOf(e) === id);
        const { responses, ...recordPart } = view;
        expect(mine.find((e) => e.type === 'record.created')!.data).to.deep.equal(recordPart);
        for (const response of responses as { feedback_response_id: string }[]) {
          const last = mine.filter((e) => e.data['feedback_response_id'] === response.feedback_response_id).at(-1)!;
          expect(last.data).to.deep.equal({ feedback_record_id: id, feedback_dataset_id: 'ds_burst', ...response });
        }
      }
    } finally {
      await receiver.close();
    }
  });

  it('receiver down 20 s then back: nothing lost, each record\'s events in order, Redis holding at most WEBHOOK_MAX_IN_FLIGHT deliveries', async () => {
    const receiver = await startWebhookReceiver();
    try {
      const endpoint = await subscribe(receiver.url, ['ds_down']);
      await receiver.stop();
      const downAt = Date.now();
      // 12 records, each answered then updated three times. Every version is announced before the
      // next is sent: a version already superseded when its round reads it back says nothing (the
      // later one has its own event, worker/round-events.ts), and a version merely stored may be
      // read back by its round after the next one is stored. So after each step, wait until the
      // endpoint's deliveries add up to the events of the step (read until they do, as below).
      const endpointCounts = async () => ((await admin('/admin/webhooks')).body.items as { id: string; deliveries: Record<string, number> }[]).find((i) => i.id === endpoint.id)!.deliveries;
      const announced = (n: number, what: string) =>
        eventually(async () => {
          const d = await endpointCounts();
          return d['pending']! + d['queued']! === n ? true : undefined;
        }, 20_000, what);
      const created = await Promise.all(
        Array.from({ length: 12 }, async (_, n) => {
          const res = await stack.post('/feedback-record', record('ds_down', n));
          await eventually(async () => ((await stack.db.collection(COLLECTIONS.responses).findOne({ _id: res.body.feedback_response_id })) === null ? undefined : true), 20_000, 'the record stored');
          return { id: res.body.feedback_record_id as string, responseId: res.body.feedback_response_id as string };
        }),
      );
      const ids = created.map((c) => c.id);
      await announced(12 * 2, 'record.created and response.created of every record');
      for (let v = 1; v <= 3; v++) {
        await Promise.all(
          created.map(async ({ id, responseId }) => {
            expect((await respond(id, 'ann-1', 10 * v)).status).to.equal(200);
            await eventually(async () => ((await stack.db.collection<{ _id: string; values?: { helpful?: number } }>(COLLECTIONS.responses).findOne({ _id: responseId }))?.values?.helpful === 10 * v ? true : undefined), 20_000, 'the update stored');
          }),
        );
        await announced(12 * (2 + v), `response.updated ${v} of every record`);
      }
      // While it is down: failed attempts retry, the rest wait in MongoDB; Redis holds at most 50 (the default in-flight cap) delivery jobs.
      const queue = stack.worker!.webhooks.queue;
      let maxJobs = 0;
      while (Date.now() - downAt < 20_000) {
        maxJobs = Math.max(maxJobs, await queue.count());
        await new Promise((r) => setTimeout(r, 500));
      }
      expect(maxJobs).to.be.at.most(stack.config.webhookMaxInFlight);
      expect(maxJobs, 'deliveries were retried while the receiver was down').to.be.greaterThan(0);
      expect(await outbox().countDocuments({ key: { $in: ids }, status: 'delivered' })).to.equal(0);
      // Those in flight are pending in the outbox, leased in Redis: the admin API shows them queued, one per record at most.
      // The counts are three reads (outbox, batches, leases), not one snapshot: an event the fan-out
      // or a delivery moves between them can be missed or counted twice for that one call
      // (docs/webhooks.md). So read until they add up, within a bound; an event really missing never does.
      let counts: Record<string, number> = {};
      await eventually(async () => {
        counts = await endpointCounts();
        return counts['pending']! + counts['queued']! === 12 * 5 ? true : undefined;
      }, 10_000, 'pending + queued = 60').catch(async (err: Error) => {
        const byStatus = await outbox().aggregate([{ $match: { key: { $in: ids } } }, { $group: { _id: '$status', n: { $sum: 1 } } }]).toArray();
        throw new Error(`${err.message}; last counts ${JSON.stringify(counts)}; outbox by status ${JSON.stringify(byStatus)}`);
      });
      expect(counts['queued']).to.be.within(1, ids.length);
      const queued = (await admin(`/admin/webhooks/${endpoint.id}/deliveries?status=queued`)).body.items as { feedback_record_id: string; status: string }[];
      expect(queued.length).to.equal(counts['queued']);
      expect(new Set(queued.map((d) => d.feedback_record_id)).size, 'one delivery per record in flight').to.equal(queued.length);
      expect(queued.every((d) => d.status === 'queued')).to.equal(true);
      await receiver.start();

      const expected = 12 * 5;
      await eventually(async () => (deduped(receiver).filter((e) => ids.includes(recordOf(e))).length >= expected ? true : undefined), 60_000, `${expected} events`);
      const events = deduped(receiver);
      for (const id of ids) {
        const mine = events.filter((e) => recordOf(e) === id);
        expect(mine.map((e) => e.type), id).to.deep.equal(['record.created', 'response.created', 'response.updated', 'response.updated', 'response.updated']);
        expect(mine.slice(1).map((e) => e.data['values'].helpful)).to.deep.equal([mine[1]!.data['values'].helpful, 10, 20, 30]);
      }
      // Order holds for every request sent, duplicates included: none arrives before an earlier event of its record.
      const position = new Map(events.map((e, i) => [e.id, i]));
      const sent = receiver.received.filter((r) => r.status < 300).map(eventOf);
      for (const id of ids) {
        const order = sent.filter((e) => recordOf(e) === id).map((e) => position.get(e.id)!);
        expect(order, id).to.deep.equal([...order].sort((a, b) => a - b));
      }
    } finally {
      await receiver.close();
    }
  });

  it('a receiver that answers 500 then 200 gets the same webhook-id again, and the delivery shows its attempts', async () => {
    const receiver = await startWebhookReceiver();
    try {
      const { id: endpointId, secret } = await subscribe(receiver.url, ['ds_flaky'], ['record.created']);
      const tried = new Set<string>();
      receiver.answer = (_body, headers) => {
        const id = String(headers['webhook-id']);
        if (tried.has(id)) return 200;
        tried.add(id);
        return 500;
      };
      const res = await stack.post('/feedback-record', record('ds_flaky', 1));
      const recordId = res.body.feedback_record_id as string;
      await eventually(async () => (deduped(receiver).length === 1 ? true : undefined), 30_000, 'the event delivered');
      expect(receiver.received.map((r) => r.status)).to.deep.equal([500, 200]);
      const [first, again] = receiver.received as [ReceivedWebhook, ReceivedWebhook];
      expect(again.headers['webhook-id']).to.equal(first.headers['webhook-id']);
      expect(again.body).to.equal(first.body);
      for (const r of receiver.received) new Webhook(secret).verify(r.body, r.headers as Record<string, string>);
      expect(() => new Webhook(secret).verify(first.body.replace('ds_flaky', 'ds_other'), first.headers as Record<string, string>)).to.throw();
      const delivery = await eventually(async () => (await outbox().findOne({ endpoint_id: endpointId, key: recordId, status: 'delivered' })) ?? undefined, 5_000, 'delivered');
      expect(delivery).to.include({ attempts: 2, last_status: 200 });
      // Counted once the outcome is written and the record's lease released (worker/webhook-delivery.ts): a moment after the document shows it.
      const counted = (text: string) => text.includes(`endpoint_id="${endpointId}",outcome="delivered"} 1`);
      const metrics = await eventually(async () => {
        const text = await stack.worker!.metrics.registry.getSingleMetricAsString('feedback_webhook_deliveries_total');
        return counted(text) ? text : undefined;
      }, 5_000, 'the delivery counted');
      expect(metrics).to.include(`endpoint_id="${endpointId}",outcome="attempt_failed"} 1`);
      expect(metrics).to.include(`endpoint_id="${endpointId}",outcome="delivered"} 1`);
    } finally {
      await receiver.close();
    }
  });

  it('a dead-lettered write emits nothing', async () => {
    const receiver = await startWebhookReceiver();
    try {
      await subscribe(receiver.url, ['ds_dead'], ['record.created', 'response.created', 'response.updated']);
      // A response to a record id this API could have minted but that was never stored: dead-lettered as record_not_stored.
      const orphan = createIdMinter(stack.config.idSigningSecrets).newRecordId('ds_dead');
      expect((await respond(orphan, 'ann-x', 1)).status).to.equal(200);
      const good = await stack.post('/feedback-record', record('ds_dead', 1));
      await eventually(async () => (await deadLetters(stack.db).findOne({ record_id: orphan })) ?? undefined, 20_000, 'the dead letter');
      await eventually(async () => (deduped(receiver).length === 2 ? true : undefined), 20_000, 'the good record\'s events');
      await stack.worker!.webhooks.dispatcher.runOnce();
      expect(deduped(receiver).map(recordOf)).to.deep.equal([good.body.feedback_record_id, good.body.feedback_record_id]);
      expect(await outbox().countDocuments({ key: orphan })).to.equal(0);
    } finally {
      await receiver.close();
    }
  });
});
