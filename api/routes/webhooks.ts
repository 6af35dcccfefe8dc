import { randomBytes } from 'node:crypto';
import * as v from 'valibot';
import { AppError } from '../../shared/errors.js';
import { DeliveryListQuery, WebhookEndpointInput, WebhookLimitError, type DeliveriesReplayed, type WebhookAdmin, type WebhookEndpointDeleted } from '../../shared/webhook-admin.js';
import { sendWebhook, urlProblem } from '../../shared/webhook-sender.js';
import { invalidInput, parseBody, parseQuery } from '../parse-input.js';
import type { ApiContext, ApiParamsContext } from '../state.js';

/** Where the webhook endpoints live; behind `authenticate` and `requireAdmin`. */
export const WEBHOOKS_PATH = '/admin/webhooks';

export interface WebhookRouteDeps {
  readonly admin: WebhookAdmin;
  /** `WEBHOOKS_ALLOW_INSECURE`. */
  readonly allowInsecure: boolean;
  /** `WEBHOOK_TIMEOUT_MS`, for the ping. */
  readonly timeoutMs: number;
}

/** The answer of `POST /admin/webhooks/{id}/test`. */
export const WebhookPing = v.object({
  id: v.string(),
  event_id: v.pipe(v.string(), v.description('The `webhook-id` of the ping.')),
  delivered: v.pipe(v.boolean(), v.description('The endpoint answered 2xx.')),
  status: v.pipe(v.nullable(v.number()), v.description('The HTTP status it answered, null without an answer.')),
  error: v.nullable(v.string()),
});
export type WebhookPing = v.InferOutput<typeof WebhookPing>;

function notFound(id: string): AppError {
  return new AppError('not_found', `no webhook endpoint has the id ${JSON.stringify(id)}`);
}

/** `POST /admin/webhooks`: 201 with the secret, shown this once. */
export function createWebhook(deps: WebhookRouteDeps) {
  return async (ctx: ApiContext): Promise<void> => {
    const input = parseBody(WebhookEndpointInput, ctx.state.body);
    const problem = urlProblem(input.url, { allowInsecure: deps.allowInsecure });
    if (problem !== undefined) throw invalidInput('url', problem);
    let created;
    try {
      created = await deps.admin.create(input);
    } catch (err) {
      // validation_failed always lists its problems with a path: the whole body here.
      if (err instanceof WebhookLimitError) throw new AppError('validation_failed', err.message, { details: [{ path: '', message: `${err.message}; delete one first` }] });
      throw err;
    }
    ctx.state.log.info({ webhook_id: created.id, events: created.events }, 'webhook endpoint created');
    ctx.status = 201;
    ctx.set('Cache-Control', 'no-store');
    ctx.body = created;
  };
}

/** `GET /admin/webhooks`: every endpoint with its deliveries by status (never the secrets). */
export function listWebhooks(deps: WebhookRouteDeps) {
  return async (ctx: ApiContext): Promise<void> => {
    ctx.body = await deps.admin.list();
  };
}

/** `DELETE /admin/webhooks/:id`: the endpoint and its outbox. */
export function deleteWebhook(deps: WebhookRouteDeps) {
  return async (ctx: ApiParamsContext): Promise<void> => {
    const id = ctx.params['id']!;
    if (!(await deps.admin.remove(id))) throw notFound(id);
    ctx.state.log.info({ webhook_id: id }, 'webhook endpoint deleted');
    ctx.body = { id, deleted: true } satisfies WebhookEndpointDeleted;
  };
}

/** `POST /admin/webhooks/:id/test`: one signed ping, sent now; says what the endpoint answered. */
export function testWebhook(deps: WebhookRouteDeps) {
  return async (ctx: ApiParamsContext): Promise<void> => {
    const id = ctx.params['id']!;
    const endpoint = await deps.admin.get(id);
    if (endpoint === undefined) throw notFound(id);
    const eventId = `evt_ping_${randomBytes(12).toString('base64url')}`;
    const now = new Date();
    const body = JSON.stringify({ type: 'webhook.ping', timestamp: now.toISOString(), data: { endpoint_id: id } });
    const outcome = await sendWebhook(endpoint, { id: eventId, timestamp: now, body }, { allowInsecure: deps.allowInsecure, timeoutMs: deps.timeoutMs });
    ctx.body = { id, event_id: eventId, delivered: outcome.ok, status: outcome.status ?? null, error: outcome.ok ? null : outcome.error } satisfies WebhookPing;
  };
}

/** `GET /admin/webhooks/:id/deliveries?status=&limit=`: the endpoint's deliveries, latest events first. */
export function listWebhookDeliveries(deps: WebhookRouteDeps) {
  return async (ctx: ApiParamsContext): Promise<void> => {
    const id = ctx.params['id']!;
    const query = parseQuery(DeliveryListQuery, ctx.query);
    if ((await deps.admin.get(id)) === undefined) throw notFound(id);
    ctx.body = await deps.admin.deliveries(id, query);
  };
}

/** `POST /admin/webhooks/:id/replay`: failed and held deliveries go out again, in their order. */
export function replayWebhookDeliveries(deps: WebhookRouteDeps) {
  return async (ctx: ApiParamsContext): Promise<void> => {
    const id = ctx.params['id']!;
    if ((await deps.admin.get(id)) === undefined) throw notFound(id);
    const replayed = await deps.admin.replay(id);
    ctx.state.log.info({ webhook_id: id, replayed }, 'webhook deliveries replayed');
    ctx.body = { endpoint_id: id, replayed } satisfies DeliveriesReplayed;
  };
}
