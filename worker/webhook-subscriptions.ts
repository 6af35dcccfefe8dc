import type { Db } from 'mongodb';
import type { Logger } from '../shared/logger.js';
import { COLLECTIONS } from '../shared/mongo.js';
import type { WebhookEndpointDoc } from '../shared/webhook-admin.js';
import type { WebhookEventType } from '../shared/webhook-events.js';

/** The endpoints the worker sends to, held in memory and reloaded every `WEBHOOK_REFRESH_MS`: a store round never reads them. */
export interface WebhookSubscriptions {
  /** True when at least one endpoint is registered: only then does a store round build events. */
  any(): boolean;
  /** The endpoints that take events of this type and dataset. */
  matching(type: WebhookEventType, datasetId: string): readonly WebhookEndpointDoc[];
  all(): readonly WebhookEndpointDoc[];
  byId(id: string): WebhookEndpointDoc | undefined;
  /** Loads now (after a load in flight). */
  refresh(): Promise<void>;
  close(): Promise<void>;
}

export function createWebhookSubscriptions(options: { readonly db: Db; readonly refreshMs: number; readonly logger: Logger }): WebhookSubscriptions {
  const col = options.db.collection<WebhookEndpointDoc>(COLLECTIONS.webhookEndpoints);
  let endpoints: readonly WebhookEndpointDoc[] = [];
  let byId = new Map<string, WebhookEndpointDoc>();
  let failing = false;
  let inFlight: Promise<void> = Promise.resolve();

  async function load(): Promise<void> {
    try {
      const docs = await col.find({}).toArray();
      endpoints = docs;
      byId = new Map(docs.map((d) => [d._id, d]));
      if (failing) options.logger.info({ endpoints: docs.length }, 'webhook endpoints loaded again');
      failing = false;
    } catch (err) {
      if (!failing) options.logger.warn({ err: (err as Error).message, endpoints: endpoints.length }, 'could not load the webhook endpoints; keeping the last loaded ones');
      failing = true;
    }
  }
  const refresh = () => (inFlight = inFlight.then(load));
  const timer = setInterval(() => void refresh(), options.refreshMs);
  timer.unref();

  return {
    any: () => endpoints.length > 0,
    matching: (type, datasetId) => endpoints.filter((e) => e.events.includes(type) && (e.datasets === null || e.datasets.includes(datasetId))),
    all: () => endpoints,
    byId: (id) => byId.get(id),
    refresh,
    async close() {
      clearInterval(timer);
      await inFlight;
    },
  };
}
