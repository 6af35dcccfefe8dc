import type { Db } from 'mongodb';
import type { Logger } from '../shared/logger.js';
import { COLLECTIONS } from '../shared/mongo.js';
import { orderFloorAt, orderTime, type OrderClock } from '../shared/order-clock.js';

/** The document that keeps the highest acceptance order any API process has persisted. */
interface OrderFloorDoc {
  _id: 'order_floor';
  order: number;
  updated_at: Date;
}

interface OrderFloor {
  /**
   * Raises the clock above the persisted floor (plus one persist interval, orders minted after
   * the last persist, when the floor is ahead of this host's clock), then keeps persisting. Bounded
   * by `timeoutMs`: when the store does not answer, the API starts on its wall clock, says so,
   * and reads the floor again every persist interval until it can.
   */
  start(timeoutMs: number): Promise<void>;
  close(): Promise<void>;
}

interface OrderFloorOptions {
  readonly db: Db;
  readonly clock: OrderClock;
  readonly logger: Logger;
  /** How often the highest minted order is persisted, ms. */
  readonly persistMs: number;
}

/**
 * Keeps the acceptance order from going back across restarts of the API when a host's clock
 * steps backwards: every process persists the highest order it minted (`$max`, so processes never
 * lower each other's), and a starting process mints above it. Redis plays no part, so a Redis
 * reset or failover cannot lower it.
 */
export function createOrderFloor(options: OrderFloorOptions): OrderFloor {
  const { clock, logger, persistMs } = options;
  const col = options.db.collection<OrderFloorDoc>(COLLECTIONS.meta);
  let timer: NodeJS.Timeout | undefined;
  let persisted = 0;
  let persisting: Promise<void> = Promise.resolve();

  const persist = () => {
    const order = clock.last();
    if (order <= persisted) return;
    persisting = col
      .updateOne({ _id: 'order_floor' }, { $max: { order }, $set: { updated_at: new Date() } }, { upsert: true, timeoutMS: persistMs })
      .then(
        () => void (persisted = Math.max(persisted, order)),
        (err: unknown) => logger.debug({ err: (err as Error).message }, 'could not persist the order floor; will retry'),
      );
  };

  /** Raises the clock above a floor read from the store. */
  const raise = (doc: OrderFloorDoc) => {
    const floorAt = orderTime(doc.order);
    const ahead = floorAt > Date.now();
    // A floor behind this clock: every order above it was minted before now, by a process on
    // a clock that had not stepped back (the one that stopped persisted its last order on a
    // graceful close). Raising this clock beyond it would run it ahead of the other API
    // processes', still at wall time, so that a write accepted here now would outrank
    // writes they accept later (a rolling restart under traffic). A floor ahead of this
    // clock says that it stepped back: then orders continue above the floor and above
    // what a process that died may have minted after its last persist.
    clock.raiseFloor(ahead ? orderFloorAt(floorAt + persistMs) : doc.order);
    persisted = Math.max(persisted, doc.order);
    if (ahead) logger.warn({ floor_at: new Date(floorAt).toISOString() }, 'the persisted order floor is ahead of this host clock: orders continue above it');
  };
  const read = async (timeoutMs: number) => {
    const doc = await col.findOne({ _id: 'order_floor' }, { timeoutMS: timeoutMs });
    if (doc !== null) raise(doc);
  };
  /** Whether the floor is still to be read: the store did not answer at start. */
  let unread = false;
  let reading = false;
  /** The bound of each read: the one `start` was given. */
  let readTimeoutMs = persistMs;
  const tick = () => {
    if (!unread) return persist();
    // Read before anything is persisted, so that a floor ahead of this clock is still seen as such.
    if (reading) return;
    reading = true;
    read(readTimeoutMs).then(
      () => {
        unread = false;
        logger.info('order floor read from MongoDB: acceptance orders continue above it');
      },
      () => undefined,
    ).finally(() => (reading = false));
  };

  return {
    async start(timeoutMs) {
      readTimeoutMs = timeoutMs;
      try {
        await read(timeoutMs);
      } catch (err) {
        unread = true;
        logger.warn({ err: (err as Error).message }, 'could not read the order floor from MongoDB: acceptance order relies on this host clock alone until it is read (tried again every second)');
      }
      timer = setInterval(tick, persistMs);
      timer.unref();
    },
    async close() {
      clearInterval(timer);
      persist();
      await persisting;
    },
  };
}
