import { DeliveriesReplayed, DeliveryList, DeliveryListQuery, WebhookEndpointCreated, WebhookEndpointDeleted, WebhookEndpointInput, WebhookEndpointList } from '../shared/webhook-admin.js';
import type { Paths } from './openapi-build.js';
import { WebhookPing } from './routes/webhooks.js';

/*
 * The OpenAPI operations of `/admin/webhooks` (api/routes/webhooks.ts), declared as api/openapi.ts
 * declares the others; the event bodies and signatures are described in docs/webhooks.md.
 */

const JSON_BODY = 'JSON (`application/json`).';
const ENDPOINT_ID = { id: 'The endpoint id (`wh_…`) returned by POST /admin/webhooks.' };

/** The schemas the document names in its components. */
export const WEBHOOK_SCHEMAS = { WebhookEndpointInput, WebhookEndpointCreated } as const;

export const WEBHOOK_PATHS: Paths = {
  '/admin/webhooks': {
    post: {
      operationId: 'createWebhook',
      summary: 'Register a webhook endpoint for some event types (and datasets)',
      description:
        'Events (`record.created`, `response.created`, `response.updated`, `response.erased`, `record.completed`) are sent after what they describe is stored ' +
        '(`response.erased`: appended just before the erasure deletes the response, so that it is never lost), signed as Standard Webhooks says, ' +
        'at least once and in order per record (hence per response). `url` must be `https://` and reach a public address unless `WEBHOOKS_ALLOW_INSECURE=true`. ' +
        'The worker takes a new endpoint up within `WEBHOOK_REFRESH_MS`. The answer holds the signing secret, shown only here. See docs/webhooks.md.',
      access: 'admin',
      body: { schema: WebhookEndpointInput, description: JSON_BODY },
      codes: ['invalid_json', 'validation_failed', 'unsupported_media_type', 'payload_too_large'],
      answers: { 201: { description: 'Created; `Cache-Control: no-store`.', json: WebhookEndpointCreated } },
    },
    get: { operationId: 'listWebhooks', summary: 'The webhook endpoints, with their deliveries by status (never their secrets)', access: 'admin', answers: { 200: { description: 'Every endpoint.', json: WebhookEndpointList } } },
  },
  '/admin/webhooks/{id}': {
    delete: { operationId: 'deleteWebhook', summary: 'Delete an endpoint and its outbox (nothing more is sent to it)', access: 'admin', path: ENDPOINT_ID, codes: ['not_found'], answers: { 200: { description: 'Deleted.', json: WebhookEndpointDeleted } } },
  },
  '/admin/webhooks/{id}/test': {
    post: {
      operationId: 'testWebhook',
      summary: 'Send a signed `webhook.ping` to the endpoint now and say what it answered',
      access: 'admin',
      path: ENDPOINT_ID,
      codes: ['not_found'],
      answers: { 200: { description: 'What the endpoint answered (`delivered` false: it did not answer 2xx).', json: WebhookPing } },
    },
  },
  '/admin/webhooks/{id}/deliveries': {
    get: {
      operationId: 'listWebhookDeliveries',
      summary: "The endpoint's deliveries, latest events first; `status=failed` lists those that need a replay",
      access: 'admin',
      path: ENDPOINT_ID,
      query: DeliveryListQuery,
      codes: ['not_found', 'validation_failed'],
      answers: { 200: { description: 'Up to `limit` deliveries.', json: DeliveryList } },
    },
  },
  '/admin/webhooks/{id}/replay': {
    post: {
      operationId: 'replayWebhookDeliveries',
      summary: 'Send the failed deliveries again, and the events they held back, in their order',
      access: 'admin',
      path: ENDPOINT_ID,
      codes: ['not_found'],
      answers: { 200: { description: 'How many went back to the outbox.', json: DeliveriesReplayed } },
    },
  },
};
