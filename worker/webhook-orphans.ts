import type { Db } from 'mongodb';
import { COLLECTIONS } from '../shared/mongo.js';
import type { WebhookEndpointDoc } from '../shared/webhook-admin.js';
import type { BatchDoc, DeliveryDoc } from '../shared/webhook-outbox.js';

/** Most endpoints one prune looks at in the outbox (one index seek each). */
const MAX_ENDPOINTS_SEEN = 10_000;

/**
 * Deletes the events waiting for endpoints that no longer exist. Deleting an endpoint
 * (`DELETE /admin/webhooks/{id}`) deletes its batches and deliveries, but a worker process whose
 * list of endpoints is older than the deletion (up to `WEBHOOK_REFRESH_MS`) may still append a
 * batch for it, or move one into the outbox, afterwards; no dispatcher would ever send or delete
 * those. An endpoint id is never used again, and a worker appends only for endpoints it loaded
 * from the store, so an id that is in no `webhook_endpoints` document now is gone for good.
 * Returns the ids whose events were deleted.
 */
export async function pruneOrphanedEvents(db: Db): Promise<string[]> {
  const batches = db.collection<BatchDoc>(COLLECTIONS.webhookBatches);
  const outbox = db.collection<DeliveryDoc>(COLLECTIONS.webhookOutbox);
  const endpoints = db.collection<WebhookEndpointDoc>(COLLECTIONS.webhookEndpoints);
  const ids = new Set(await batches.distinct('endpoint_id'));
  // Endpoints with pending deliveries, one seek each along the sparse `q` index (`<endpoint>|…`):
  // the outbox holds about a page of pending deliveries per endpoint, the rest wait in batches.
  let after = '';
  for (let i = 0; i < MAX_ENDPOINTS_SEEN; i++) {
    const [next] = await outbox.find({ q: { $gt: after } }, { projection: { _id: 0, endpoint_id: 1 } }).sort({ q: 1 }).limit(1).toArray();
    if (next === undefined) break;
    ids.add(next.endpoint_id);
    after = `${next.endpoint_id}}`;
  }
  if (ids.size === 0) return [];
  const live = new Set((await endpoints.find({ _id: { $in: [...ids] } }, { projection: { _id: 1 } }).toArray()).map((e) => e._id));
  const gone = [...ids].filter((id) => !live.has(id));
  for (const id of gone) {
    await batches.deleteMany({ endpoint_id: id });
    await outbox.deleteMany({ endpoint_id: id });
  }
  return gone;
}
