import type { Db } from 'mongodb';
import type { Logger } from '../shared/logger.js';
import { COLLECTIONS } from '../shared/mongo.js';
import { pendingOrder, recordKey, type DeliveryDoc } from '../shared/webhook-outbox.js';

/** The outbox's compound indexes of earlier releases: each costs every insert and status change an entry per field. */
const OBSOLETE_INDEXES = ['endpoint_status_seq', 'endpoint_key_status'] as const;
/** Deliveries given their keys per bulk command. */
const PAGE = 1000;

/**
 * Brings an outbox written by an earlier release to the current keys (shared/webhook-outbox.ts
 * `DeliveryDoc`): the dispatcher finds deliveries by `k`, `q` and `f` only, so one appended before
 * would otherwise wait for ever. Drops the compound indexes those releases created. Run as the
 * worker's webhooks start; idempotent, and a read of nothing once done.
 */
export async function upgradeOutbox(db: Db, logger: Logger): Promise<void> {
  const outbox = db.collection<DeliveryDoc>(COLLECTIONS.webhookOutbox);
  const existing = new Set((await outbox.listIndexes().toArray().catch(() => [])).map((i) => String(i['name'])));
  for (const name of OBSOLETE_INDEXES) if (existing.has(name)) await outbox.dropIndex(name);
  let upgraded = 0;
  for (;;) {
    const docs = await outbox.find({ k: { $exists: false } }, { projection: { _id: 1, endpoint_id: 1, key: 1, seq: 1, rank: 1, status: 1 } }).limit(PAGE).toArray();
    if (docs.length === 0) break;
    await outbox.bulkWrite(
      docs.map((d) => ({
        updateOne: {
          filter: { _id: d._id },
          update: {
            $set: {
              k: recordKey(d.endpoint_id, d.key),
              ...(d.status === 'pending' ? { q: pendingOrder(d.endpoint_id, d.seq, d.rank) } : {}),
              // A delivery queued by an earlier release has no claim: reconcile() puts it back to pending once its job is gone.
              ...(d.status === 'queued' ? { f: d.endpoint_id } : {}),
            },
          },
        },
      })),
      { ordered: false },
    );
    upgraded += docs.length;
  }
  if (upgraded > 0 || existing.has(OBSOLETE_INDEXES[0])) logger.info({ upgraded, dropped: OBSOLETE_INDEXES.filter((n) => existing.has(n)) }, 'webhook outbox upgraded to single-field keys');
}
