import { expect } from 'chai';
import { MongoNetworkError, type Db } from 'mongodb';
import { Webhook } from 'standardwebhooks';
import * as v from 'valibot';
import { createFeedbackClient } from '../../client/index.js';
import { WebhookPing } from '../../api/routes/webhooks.js';
import { DeliveriesReplayed, DeliveryList, WebhookEndpointCreated, WebhookEndpointList } from '../../shared/webhook-admin.js';
import type { RecordDoc, ResponseDoc } from '../../shared/documents.js';
import { newErasureId } from '../../shared/erasures.js';
import { createIdMinter } from '../../shared/ids.js';
import { decodeJob } from '../../shared/job-payload.js';
import { COLLECTIONS } from '../../shared/mongo.js';
import { orderFloorAt } from '../../shared/order-clock.js';
import { appKeyPrefix } from '../../shared/redis-keys.js';
import type { DeliveryDoc } from '../../shared/webhook-admin.js';
import { WEBHOOK_EVENT_TYPES } from '../../shared/webhook-events.js';
import { createCompletionTracker } from '../../worker/completion.js';
import { createCompletionEvents } from '../../worker/completion-events.js';
import type { SequencedWrite } from '../../worker/documents.js';
import { createErasureEvents } from '../../worker/erasure-events.js';
import { createEraser, type ErasureItem } from '../../worker/erasures.js';
import { TransientStoreError } from '../../worker/errors.js';
import { createEventOutbox } from '../../worker/event-outbox.js';
import { createRoundEvents } from '../../worker/round-events.js';
import { createFeedbackWriter, type FeedbackWriter } from '../../worker/writer.js';
import { OTHER_KEY, testConfig, TEST_KEY } from '../helpers/env.js';
import { deadLetters, eventually, silentLogger, startStack, type HttpResult, type Stack } from '../helpers/stack.js';
import { startWebhookReceiver, type ReceivedWebhook, type WebhookReceiver } from '../helpers/webhook-receiver.js';

const ADMIN = { name: 'ops', secret: 'ops-secret-key-0003' } as const;
const API_KEYS = `${TEST_KEY.name}:${TEST_KEY.secret},${OTHER_KEY.name}:${OTHER_KEY.secret},${ADMIN.name}:${ADMIN.secret}`;
/** Fast retries, so that a receiver down 20 s is retried many times, never given up on. */
const WEBHOOK_ENV = {
  API_KEYS,
  ADMIN_API_KEY_NAMES: ADMIN.name,
  WEBHOOKS_ALLOW_INSECURE: 'true',
  WEBHOOK_BACKOFF_MS: '100',
  WEBHOOK_BACKOFF_MAX_MS: '1000',
  WEBHOOK_MAX_ATTEMPTS: '1000',
  WEBHOOK_REFRESH_MS: '100',
  WEBHOOK_DISPATCH_MS: '50',
  WEBHOOK_TIMEOUT_MS: '2000',
};

interface Event {
  readonly id: string;
  readonly type: string;
  readonly timestamp: string;
  readonly data: Record<string, any>;
}

const eventOf = (r: ReceivedWebhook): Event => ({ id: String(r.headers['webhook-id']), ...(JSON.parse(r.body) as Omit<Event, 'id'>) });
const recordOf = (e: Event): string => (e.type.startsWith('record.') ? e.data['feedback_record_id'] : e.data['feedback_record_id']) as string;
/** The events a receiver accepted (2xx), deduplicated by webhook-id, first arrival first. */
function deduped(receiver: WebhookReceiver): Event[] {
  const seen = new Map<string, Event>();
  for (const r of receiver.received) if (r.status < 300 && !seen.has(String(r.headers['webhook-id']))) seen.set(String(r.headers['webhook-id']), eventOf(r));
  return [...seen.values()];
}

/** A call with the admin key. */
function adminRequest(stack: Stack, path: string, method = 'GET', body?: unknown): Promise<HttpResult> {
  return stack.request(path, { method, headers: { Authorization: `Bearer ${ADMIN.secret}`, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
}

/** Registers an endpoint and waits until the worker sends to it. */
async function subscribeTo(stack: Stack, url: string, datasets: string[], events: readonly string[]): Promise<{ id: string; secret: string }> {
  const res = await adminRequest(stack, '/admin/webhooks', 'POST', { url, events, datasets });
  expect(res.status, res.text).to.equal(201);
  await stack.worker!.webhooks.subscriptions.refresh();
  return { id: res.body.id, secret: res.body.secret };
}

const record = (dataset: string, n: number, user = 'ann-1') => ({ record: { feedback_dataset_id: dataset, field_to_value: { prompt: `q${n}`, answer: `a${n}` } }, response: { values: { helpful: n % 5 }, user_id: user } });

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
      expect(item.deliveries).to.deep.equal({ pending: 0, queued: 0, delivered: 0, failed: 0, held: 0 });

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
      ] as const) {
        const res = await admin('/admin/webhooks', 'POST', body);
        expect(res.status, JSON.stringify(body)).to.equal(400);
        expect(res.body.error.code).to.equal('validation_failed');
        expect(res.body.error.details.map((d: { path: string }) => d.path)).to.include(path);
      }
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
      // Records with their first responses, in one burst of concurrent batches.
      const batches = await Promise.all(
        Array.from({ length: 4 }, (_, b) => stack.post('/feedback-batch', { items: Array.from({ length: 25 }, (_, i) => record('ds_burst', b * 25 + i)) })),
      );
      const ids = batches.flatMap((res) => (res.body.items as { result: { feedback_record_id: string; feedback_response_id: string } }[]).map((i) => i.result));
      expect(ids).to.have.length(100);
      await eventually(async () => ((await stack.db.collection(COLLECTIONS.responses).countDocuments({ feedback_dataset_id: 'ds_burst' })) === 100 ? true : undefined), 30_000, 'the records stored');
      // Then a burst of one update per response of the first 40, and a second annotator on the last 30.
      const second = await Promise.all([...ids.slice(0, 40).map((r) => respond(r.feedback_record_id, 'ann-1', 9)), ...ids.slice(70).map((r) => respond(r.feedback_record_id, 'ann-2', 7))]);
      expect(second.every((r) => r.status === 200)).to.equal(true);
      const expected = 100 + 100 + 40 + 30;
      const events = await eventually(async () => (deduped(receiver).length >= expected ? deduped(receiver) : undefined), 60_000, `${expected} events`);
      await new Promise((r) => setTimeout(r, 500));
      expect(deduped(receiver)).to.have.length(expected);
      const count = (type: string) => events.filter((e) => e.type === type).length;
      expect({ records: count('record.created'), created: count('response.created'), updated: count('response.updated') }).to.deep.equal({ records: 100, created: 130, updated: 40 });
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
      await subscribe(receiver.url, ['ds_down']);
      await receiver.stop();
      const downAt = Date.now();
      // 12 records, each answered then updated three times, every version stored before the next is sent.
      const ids = await Promise.all(
        Array.from({ length: 12 }, async (_, n) => {
          const res = await stack.post('/feedback-record', record('ds_down', n));
          const id = res.body.feedback_record_id as string;
          // Each version stored before the next is sent: versions of one round collapse to the newest, which alone is stored and announced.
          await eventually(async () => ((await stack.db.collection(COLLECTIONS.responses).findOne({ _id: res.body.feedback_response_id })) === null ? undefined : true), 20_000, 'the record stored');
          for (let v = 1; v <= 3; v++) {
            expect((await respond(id, 'ann-1', 10 * v)).status).to.equal(200);
            await eventually(async () => ((await stack.db.collection(COLLECTIONS.responses).findOne({ _id: res.body.feedback_response_id }))?.['values']?.helpful === 10 * v ? true : undefined), 20_000, 'the update stored');
          }
          return id;
        }),
      );
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
      const metrics = await stack.worker!.metrics.registry.getSingleMetricAsString('feedback_webhook_deliveries_total');
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
});

/**
 * `db` whose collection `name` fails its first `insertMany` of documents that `when` picks (default:
 * any) as an unreachable store does; every other command goes to the real store.
 */
function failingFirstInsert(db: Db, name: string, when: (docs: readonly DeliveryDoc[]) => boolean = () => true): { readonly db: Db; readonly failures: () => number } {
  let failures = 0;
  const bound = (target: object, member: unknown) => (typeof member === 'function' ? (member as (...a: unknown[]) => unknown).bind(target) : member);
  const proxy = new Proxy(db, {
    get(target, prop) {
      if (prop !== 'collection') return bound(target, Reflect.get(target, prop, target));
      return (collectionName: string) => {
        const col = target.collection(collectionName);
        if (collectionName !== name) return col;
        return new Proxy(col, {
          get(c, p) {
            if (p !== 'insertMany') return bound(c, Reflect.get(c, p, c));
            return async (...args: unknown[]) => {
              if (failures === 0 && when(args[0] as DeliveryDoc[])) {
                failures++;
                throw new MongoNetworkError(`${name} unreachable (injected)`);
              }
              return (c.insertMany as (...a: unknown[]) => Promise<unknown>)(...args);
            };
          },
        });
      };
    },
  });
  return { db: proxy, failures: () => failures };
}

describe('webhooks: response.erased', function () {
  this.timeout(60_000);
  let stack: Stack;
  before(async () => {
    stack = await startStack(testConfig({ ...WEBHOOK_ENV, ERASURE_SETTLE_MS: '0' }));
  });
  after(async () => {
    await stack?.close();
  });

  const respond = (recordId: string, user: string, value: number) => stack.post('/feedback-response', { feedback_record_id: recordId, response: { status: 'submitted', values: { helpful: value }, user_id: user } });
  const responseDocs = () => stack.db.collection<ResponseDoc>(COLLECTIONS.responses);
  /** Waits until the response holds `value` (the version sent is stored). */
  const storedWith = (responseId: string, value: number) =>
    eventually(async () => ((await responseDocs().findOne({ _id: responseId }))?.values['helpful'] === value ? true : undefined), 20_000, `${responseId} stored with ${value}`);

  it('an erasure delivers exactly one response.erased per response it removed, naming the erasure, after that response\'s other events', async () => {
    const receiver = await startWebhookReceiver();
    try {
      const { secret } = await subscribeTo(stack, receiver.url, ['ds_erased'], WEBHOOK_EVENT_TYPES);
      const user = 'end-user-erased';
      // Three records the user created (their first responses are the user's), one answered by another annotator too;
      // a record someone else created, which the user answered and then changed.
      const created = await Promise.all([1, 2, 3].map((n) => stack.post('/feedback-record', record('ds_erased', n, user))));
      const kept = await stack.post('/feedback-record', record('ds_erased', 4, 'someone-else'));
      const firsts = [...created, kept].map((r) => r.body.feedback_response_id as string);
      await eventually(async () => ((await responseDocs().countDocuments({ _id: { $in: firsts } })) === firsts.length ? true : undefined), 20_000, 'the records stored');
      const other = await respond(created[0]!.body.feedback_record_id, 'ann-other', 7);
      const mine = await respond(kept.body.feedback_record_id, user, 1);
      await storedWith(mine.body.feedback_response_id, 1);
      expect((await respond(kept.body.feedback_record_id, user, 2)).status).to.equal(200);
      await storedWith(mine.body.feedback_response_id, 2);
      await storedWith(other.body.feedback_response_id, 7);

      const accepted = await adminRequest(stack, '/admin/erasures', 'POST', { user_id: user });
      expect(accepted.status, accepted.text).to.equal(202);
      const erasureId = accepted.body.erasure_id as string;
      const done = await eventually(async () => {
        const res = await adminRequest(stack, `/admin/erasures/${erasureId}`);
        return res.body.status === 'done' ? res.body : undefined;
      }, 30_000, 'the erasure done');
      // The user's three records with both their responses, and the user's response to the kept record.
      const recordOfRemoved = new Map<string, string>([
        ...created.map((r) => [r.body.feedback_response_id, r.body.feedback_record_id] as [string, string]),
        [other.body.feedback_response_id, created[0]!.body.feedback_record_id],
        [mine.body.feedback_response_id, kept.body.feedback_record_id],
      ]);
      const removed = [...recordOfRemoved.keys()];
      expect(done.removed.responses).to.equal(removed.length);

      const erasedEvents = () => deduped(receiver).filter((e) => e.type === 'response.erased');
      await eventually(async () => (erasedEvents().length >= removed.length ? true : undefined), 30_000, `${removed.length} response.erased`);
      await stack.worker!.webhooks.dispatcher.runOnce();
      await new Promise((r) => setTimeout(r, 300));
      const events = deduped(receiver);
      const erased = events.filter((e) => e.type === 'response.erased');
      expect(erased.map((e) => e.data['feedback_response_id']).sort()).to.deep.equal([...removed].sort());
      for (const e of erased) {
        const id = e.data['feedback_response_id'] as string;
        expect(e.data).to.deep.equal({ feedback_response_id: id, feedback_record_id: recordOfRemoved.get(id), feedback_dataset_id: 'ds_erased', erasure_id: erasureId });
        // After every other event of that response that was delivered at all (those still waiting
        // when the erasure ran were deleted with the data they carry: worker/erasure-outbox.ts).
        const at = events.indexOf(e);
        const earlier = events.filter((x) => x.type !== 'response.erased' && x.data['feedback_response_id'] === id);
        for (const x of earlier) expect(events.indexOf(x), `${x.type} of ${id} before its response.erased`).to.be.lessThan(at);
      }
      expect(erased.filter((e) => e.data['feedback_response_id'] === kept.body.feedback_response_id), 'someone else\'s response is kept').to.have.length(0);
      const mineEvents = events.filter((e) => e.data['feedback_response_id'] === mine.body.feedback_response_id).map((e) => e.type);
      expect(mineEvents.at(-1)).to.equal('response.erased');
      expect(mineEvents.slice(0, -1).every((t) => t === 'response.created' || t === 'response.updated'), mineEvents.join(', ')).to.equal(true);
      // The outbox keeps no event that carries the erased data: none of the responses' own, no
      // record.created or record.completed of the erased records; their response.erased stay.
      const outbox = stack.db.collection<DeliveryDoc>(COLLECTIONS.webhookOutbox);
      expect(await outbox.countDocuments({ subject_id: { $in: removed }, event_type: { $in: ['response.created', 'response.updated'] } })).to.equal(0);
      expect(await outbox.countDocuments({ key: { $in: created.map((r) => r.body.feedback_record_id as string) }, event_type: { $in: ['record.created', 'record.completed'] } })).to.equal(0);
      expect(await outbox.countDocuments({ key: kept.body.feedback_record_id as string, event_type: 'record.created' }), 'the kept record\'s own event stays').to.equal(1);
      // Its order is the erasure's: after every write of the user accepted before it.
      const tombstone = await stack.db.collection<{ _id: string; seq: number }>(COLLECTIONS.erasures).findOne({ _id: erasureId });
      const deliveries = await stack.db.collection<DeliveryDoc>(COLLECTIONS.webhookOutbox).find({ event_type: 'response.erased', dataset_id: 'ds_erased' }).toArray();
      expect(new Set(deliveries.map((d) => d.seq))).to.deep.equal(new Set([tombstone!.seq]));
      for (const r of receiver.received) new Webhook(secret).verify(r.body, r.headers as Record<string, string>);
    } finally {
      await receiver.close();
    }
  });

  it('an outbox outage while a sweep announces its removals leaves the responses stored: the retried sweep announces each once, then removes it', async () => {
    const receiver = await startWebhookReceiver();
    try {
      await subscribeTo(stack, receiver.url, ['ds_erased_outage'], ['response.erased']);
      const user = 'end-user-outage';
      const created = await Promise.all([1, 2, 3].map((n) => stack.post('/feedback-record', record('ds_erased_outage', n, user))));
      const ids = created.map((r) => r.body.feedback_response_id as string);
      await eventually(async () => ((await responseDocs().countDocuments({ _id: { $in: ids } })) === ids.length ? true : undefined), 20_000, 'the responses stored');

      // The worker's eraser and outbox on the real store, whose outbox is unreachable for its first append.
      const failing = failingFirstInsert(stack.db, COLLECTIONS.webhookOutbox);
      const outbox = createEventOutbox({ db: failing.db, subscriptions: stack.worker!.webhooks.subscriptions, logger: silentLogger });
      const eraser = createEraser({
        db: stack.db, redis: stack.worker!.redis, appKeyPrefix: appKeyPrefix(stack.config), ids: createIdMinter(stack.config.idSigningSecrets), logger: silentLogger, settleMs: 0,
        removing: createErasureEvents({ outbox }),
      });
      const highest = await responseDocs().find({ user_id: user }).sort({ seq: -1 }).limit(1).next();
      const erasureId = newErasureId(createIdMinter(stack.config.idSigningSecrets), undefined);
      const item: ErasureItem = {
        write: { kind: 'erasure', request_id: 'req-erasure-outage', accepted_at: Date.now(), api_key: ADMIN.name, record_id: erasureId, response_id: erasureId, erasure: { user_id: user, records: 'keep' } },
        seq: highest!.seq + 1,
        index: 0,
      };
      const first = await eraser.begin([item]).then(() => undefined, (err: unknown) => err);
      expect(first, 'the outage fails the attempt').to.be.instanceOf(TransientStoreError);
      expect(failing.failures()).to.equal(1);
      expect(await responseDocs().countDocuments({ _id: { $in: ids } }), 'nothing removed before it is announced').to.equal(ids.length);
      // The job's retry.
      await eraser.begin([item]);
      await eraser.finish([item]);
      expect(await responseDocs().countDocuments({ _id: { $in: ids } })).to.equal(0);

      await eventually(async () => (deduped(receiver).length >= ids.length ? true : undefined), 20_000, `${ids.length} response.erased`);
      await stack.worker!.webhooks.dispatcher.runOnce();
      await new Promise((r) => setTimeout(r, 300));
      const erased = deduped(receiver);
      expect(erased.map((e) => e.data['feedback_response_id']).sort()).to.deep.equal([...ids].sort());
      expect(erased.every((e) => e.type === 'response.erased' && e.data['erasure_id'] === erasureId)).to.equal(true);
    } finally {
      await receiver.close();
    }
  });
});

describe('webhooks: record.completed', function () {
  this.timeout(60_000);
  const DEFINITION = { fields: [{ name: 'prompt', type: 'text' }, { name: 'answer', type: 'text' }], questions: [{ name: 'helpful', type: 'number' }] };
  let stack: Stack;
  before(async () => {
    stack = await startStack(testConfig({ ...WEBHOOK_ENV }), { worker: false });
    const put = await adminRequest(stack, '/datasets/ds_complete', 'PUT', { ...DEFINITION, completion: { min_submitted: 2 } });
    expect(put.status, put.text).to.equal(201);
    // The worker loads the completion rules as it starts.
    await stack.startWorker();
  });
  after(async () => {
    await stack?.close();
  });

  const respond = (recordId: string, user: string, status: 'submitted' | 'draft', value: number) =>
    stack.post('/feedback-response', { feedback_record_id: recordId, response: { status, values: { helpful: value }, user_id: user } });
  const responseDocs = () => stack.db.collection<ResponseDoc>(COLLECTIONS.responses);
  const recordDocs = () => stack.db.collection<RecordDoc>(COLLECTIONS.records);
  const statusIs = (recordId: string, status: string) =>
    eventually(async () => ((await recordDocs().findOne({ _id: recordId }))?.status === status ? true : undefined), 20_000, `${recordId} ${status}`);
  const storedSeq = async (responseId: string, value: number) =>
    eventually(async () => {
      const doc = await responseDocs().findOne({ _id: responseId });
      return doc?.values['helpful'] === value ? doc.seq : undefined;
    }, 20_000, `${responseId} stored with ${value}`);

  it('the second annotator\'s submitted response completes the record: one event holding both responses, after that response\'s; draft and back: a second id; the job run again: no new id', async () => {
    const receiver = await startWebhookReceiver();
    try {
      const { secret } = await subscribeTo(stack, receiver.url, ['ds_complete'], WEBHOOK_EVENT_TYPES);
      const created = await stack.post('/feedback-record', record('ds_complete', 1, 'ann-a'));
      const recordId = created.body.feedback_record_id as string;
      await storedSeq(created.body.feedback_response_id, 1);
      const b = await respond(recordId, 'ann-b', 'submitted', 5);
      const bSeq = await storedSeq(b.body.feedback_response_id, 5);
      await statusIs(recordId, 'completed');

      const completedEvents = () => deduped(receiver).filter((e) => e.type === 'record.completed');
      await eventually(async () => (completedEvents().length >= 1 ? true : undefined), 20_000, 'record.completed');
      const first = completedEvents()[0]!;
      // Its id names the order of the write whose storing completed it.
      expect(first.id).to.equal(`evt_record_completed_${recordId}_${bSeq}`);
      const view = (await adminRequest(stack, `/feedback-record/${recordId}`)).body;
      expect(first.data).to.deep.equal(view);
      expect(view.status).to.equal('completed');
      expect((first.data['responses'] as { user_id: string }[]).map((r) => r.user_id)).to.deep.equal(['ann-a', 'ann-b']);
      // record.created says what the record was when stored: pending under the rule (its first response alone), as GET said then.
      const createdEvent = deduped(receiver).find((e) => e.type === 'record.created' && e.data['feedback_record_id'] === recordId);
      expect(createdEvent?.data['status']).to.equal('pending');
      const order = (events: Event[], pick: (e: Event) => boolean) => events.findIndex(pick);
      let events = deduped(receiver);
      expect(order(events, (e) => e.id === first.id)).to.be.greaterThan(order(events, (e) => e.type === 'response.created' && e.data['user_id'] === 'ann-b'));

      // Back to pending (no event), then completed again: a second event with another id, after the response that completed it.
      expect((await respond(recordId, 'ann-a', 'draft', 2)).status).to.equal(200);
      await statusIs(recordId, 'pending');
      expect((await respond(recordId, 'ann-a', 'submitted', 3)).status).to.equal(200);
      const aSeq = await storedSeq(created.body.feedback_response_id, 3);
      await statusIs(recordId, 'completed');
      await eventually(async () => (completedEvents().length >= 2 ? true : undefined), 20_000, 'a second record.completed');
      events = deduped(receiver);
      const second = completedEvents()[1]!;
      expect(second.id).to.equal(`evt_record_completed_${recordId}_${aSeq}`);
      expect(order(events, (e) => e.id === second.id)).to.be.greaterThan(order(events, (e) => e.type === 'response.updated' && e.data['values']?.helpful === 3));

      // The job that completed it again runs once more (same writes, same orders), as after a crash before it completed.
      const jobs = await stack.api.queue.getJobs(['completed']);
      const again = jobs.find((job) => {
        const decoded = decodeJob(job.data);
        return decoded.ok && decoded.writes.some((w) => (w as { seq?: number }).seq === aSeq);
      });
      expect(again, 'the job of the write that completed it').to.not.equal(undefined);
      const rerun = await stack.api.queue.add(again!.name, again!.data);
      await eventually(async () => ((await rerun.getState()) === 'completed' ? true : undefined), 20_000, 'the job run again');
      expect((await stack.api.queue.getJob(rerun.id!))?.returnvalue, 'the same write, applied again over its own version').to.include({ responses: 1, dead_lettered: 0 });
      await stack.worker!.webhooks.dispatcher.runOnce();
      await new Promise((r) => setTimeout(r, 500));
      expect(completedEvents().map((e) => e.id)).to.deep.equal([first.id, second.id]);
      expect(await stack.db.collection<DeliveryDoc>(COLLECTIONS.webhookOutbox).countDocuments({ key: recordId, event_type: 'record.completed' })).to.equal(2);
      for (const r of receiver.received) new Webhook(secret).verify(r.body, r.headers as Record<string, string>);
    } finally {
      await receiver.close();
    }
  });

  describe('an outbox outage while a round appends its record.completed', () => {
    const DATASETS: Record<string, number> = { ds_complete_outage: 2, ds_complete_first: 1 };
    const at = 1_700_000_000_000;
    const recordWrite = (dataset: string, n: number, seq: number): SequencedWrite => ({
      write: {
        kind: 'record', request_id: `req-${dataset}-${n}`, accepted_at: at + n, api_key: TEST_KEY.name, record_id: `rec_${dataset}_${n}`, response_id: `rsp_${dataset}_${n}_a`,
        record: { feedback_dataset_id: dataset, field_to_value: { prompt: `q${n}` } }, response: { status: 'submitted', values: { helpful: 1 }, user_id: 'ann-a' },
      },
      seq, index: 0,
    });
    const responseWrite = (dataset: string, n: number, seq: number): SequencedWrite => ({
      write: {
        kind: 'response', request_id: `req-${dataset}-${n}-b`, accepted_at: at + n + 1, api_key: TEST_KEY.name, record_id: `rec_${dataset}_${n}`, response_id: `rsp_${dataset}_${n}_b`,
        response: { status: 'submitted', values: { helpful: 2 }, user_id: 'ann-b' },
      },
      seq, index: 0,
    });

    /** The worker's writer, completion and outbox on the real store, whose outbox is unreachable for the first append holding a record.completed. */
    function writerWithOutage() {
      const failing = failingFirstInsert(stack.db, COLLECTIONS.webhookOutbox, (docs) => docs.some((d) => d.event_type === 'record.completed'));
      const outbox = createEventOutbox({ db: failing.db, subscriptions: stack.worker!.webhooks.subscriptions, logger: silentLogger });
      const completion = createCompletionTracker({
        db: stack.db,
        rules: { ruleOf: (id) => (DATASETS[id] === undefined ? undefined : { min_submitted: DATASETS[id] }) },
        onCompleting: createCompletionEvents({ db: stack.db, outbox }),
      });
      return { failing, writer: createFeedbackWriter({ db: stack.db, logger: silentLogger, completion, events: createRoundEvents({ db: stack.db, outbox }) }) };
    }

    /** The job's attempt fails with the outage, the next one goes through. */
    async function writeTwice(writer: FeedbackWriter, items: SequencedWrite[]): Promise<void> {
      const failed = await writer.write(items).then(() => undefined, (err: unknown) => err);
      expect(failed, 'the outage fails the round').to.be.instanceOf(TransientStoreError);
      expect((await writer.write(items)).map((r) => r.kind)).to.not.include('rejected');
    }

    it('a record completed by a later response: the job\'s retry appends it, once, after that response\'s event', async () => {
      const receiver = await startWebhookReceiver();
      try {
        await subscribeTo(stack, receiver.url, ['ds_complete_outage'], WEBHOOK_EVENT_TYPES);
        const { failing, writer } = writerWithOutage();
        const base = orderFloorAt(Date.now());
        await writer.write([recordWrite('ds_complete_outage', 1, base + 64)]);
        await writeTwice(writer, [responseWrite('ds_complete_outage', 1, base + 128)]);
        expect(failing.failures()).to.equal(1);
        expect((await recordDocs().findOne({ _id: 'rec_ds_complete_outage_1' }))?.status).to.equal('completed');
        await eventually(async () => (deduped(receiver).length >= 4 ? true : undefined), 20_000, 'the record\'s four events');
        await stack.worker!.webhooks.dispatcher.runOnce();
        await new Promise((r) => setTimeout(r, 300));
        const events = deduped(receiver);
        expect(events.map((e) => e.type)).to.deep.equal(['record.created', 'response.created', 'response.created', 'record.completed']);
        expect(events[3]!.id).to.equal(`evt_record_completed_rec_ds_complete_outage_1_${base + 128}`);
      } finally {
        await receiver.close();
      }
    });

    it('a record inserted completed (min_submitted 1): the job\'s retry appends it, once', async () => {
      const receiver = await startWebhookReceiver();
      try {
        await subscribeTo(stack, receiver.url, ['ds_complete_first'], ['record.completed']);
        const { failing, writer } = writerWithOutage();
        const seq = orderFloorAt(Date.now());
        await writeTwice(writer, [recordWrite('ds_complete_first', 1, seq)]);
        expect(failing.failures()).to.equal(1);
        await eventually(async () => (deduped(receiver).length >= 1 ? true : undefined), 20_000, 'record.completed');
        await stack.worker!.webhooks.dispatcher.runOnce();
        await new Promise((r) => setTimeout(r, 300));
        expect(deduped(receiver).map((e) => e.id)).to.deep.equal([`evt_record_completed_rec_ds_complete_first_1_${seq}`]);
      } finally {
        await receiver.close();
      }
    });
  });
});

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
