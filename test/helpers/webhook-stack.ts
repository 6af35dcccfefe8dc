import { expect } from 'chai';
import { MongoNetworkError, type Db } from 'mongodb';
import { COLLECTIONS } from '../../shared/mongo.js';
import { type BatchDoc, type BatchedEvent } from '../../shared/webhook-outbox.js';
import { decodeBatch } from '../../worker/batch-lines.js';
import { OTHER_KEY, TEST_KEY } from './env.js';
import type { HttpResult, Stack } from './stack.js';
import type { ReceivedWebhook, WebhookReceiver } from './webhook-receiver.js';

/*
 * What the webhook suites share (test/integration/webhooks.test.ts, webhook-events.test.ts): the
 * admin key and settings of a stack that sends webhooks, the events a receiver got, an endpoint's
 * registration, and a store that fails an outbox append once.
 */
export const ADMIN = { name: 'ops', secret: 'ops-secret-key-0003' } as const;
export const API_KEYS = `${TEST_KEY.name}:${TEST_KEY.secret},${OTHER_KEY.name}:${OTHER_KEY.secret},${ADMIN.name}:${ADMIN.secret}`;
/** Fast retries, so that a receiver down 20 s is retried many times, never given up on. */
export const WEBHOOK_ENV = {
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

export interface Event {
  readonly id: string;
  readonly type: string;
  readonly timestamp: string;
  readonly data: Record<string, any>;
}

export const eventOf = (r: ReceivedWebhook): Event => ({ id: String(r.headers['webhook-id']), ...(JSON.parse(r.body) as Omit<Event, 'id'>) });
/** The record an event is about (every event's data names it). */
export const recordOf = (e: Event): string => e.data['feedback_record_id'] as string;
/** The events a receiver accepted (2xx), deduplicated by webhook-id, first arrival first. */
export function deduped(receiver: WebhookReceiver): Event[] {
  const seen = new Map<string, Event>();
  for (const r of receiver.received) if (r.status < 300 && !seen.has(String(r.headers['webhook-id']))) seen.set(String(r.headers['webhook-id']), eventOf(r));
  return [...seen.values()];
}

/** A call with the admin key. */
export function adminRequest(stack: Stack, path: string, method = 'GET', body?: unknown): Promise<HttpResult> {
  return stack.request(path, { method, headers: { Authorization: `Bearer ${ADMIN.secret}`, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
}

/** Registers an endpoint and waits until the worker sends to it. */
export async function subscribeTo(stack: Stack, url: string, datasets: string[], events: readonly string[]): Promise<{ id: string; secret: string }> {
  const res = await adminRequest(stack, '/admin/webhooks', 'POST', { url, events, datasets });
  expect(res.status, res.text).to.equal(201);
  await stack.worker!.webhooks.subscriptions.refresh();
  return { id: res.body.id, secret: res.body.secret };
}

export const record = (dataset: string, n: number, user = 'ann-1') => ({ record: { feedback_dataset_id: dataset, field_to_value: { prompt: `q${n}`, answer: `a${n}` } }, response: { values: { helpful: n % 5 }, user_id: user } });

/**
 * `db` whose collection `name` fails its first `insertMany` of documents that `when` picks (default:
 * any) as an unreachable store does; every other command goes to the real store.
 */
export function failingFirstInsert(db: Db, name: string, when: (docs: readonly BatchDoc[]) => boolean = () => true): { readonly db: Db; readonly failures: () => number } {
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
              if (failures === 0 && when(args[0] as BatchDoc[])) {
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

/** An event of the outbox or of a batch not moved into it yet (worker/webhook-fan-out.ts). */
export type OutboxEvent = BatchedEvent & { readonly endpoint_id: string };

/** Every event appended and not pruned: the outbox's deliveries and the events still in their batches. */
export async function outboxEvents(db: Db): Promise<OutboxEvent[]> {
  const moved = await db.collection<OutboxEvent>(COLLECTIONS.webhookOutbox).find({}).toArray();
  const batched = (await db.collection<BatchDoc>(COLLECTIONS.webhookBatches).find({}).toArray()).flatMap((b) => decodeBatch(b).map((e) => ({ ...e, endpoint_id: b.endpoint_id })));
  return [...moved, ...batched];
}
