import { randomInt } from 'node:crypto';

/**
 * Acceptance order of writes: a hybrid logical clock minted by the API process that accepts a
 * write. An order is a safe integer laid out as
 *
 *     (milliseconds since ORDER_EPOCH_MS) · 2^13  +  counter · 2^6  +  node
 *
 * 40 bits of milliseconds (until 2058-11), a 7-bit counter for writes accepted in the same
 * millisecond by the same process (past 128, the clock borrows the next millisecond, as a hybrid
 * logical clock does), and a 6-bit node per process so that two processes never mint the same
 * number in the same millisecond: the API processes of one host get distinct nodes
 * ({@link clusterOrderNodes}), processes of different hosts random ones (a tie there is 1 in 64).
 * It never goes back within a process, whatever the wall clock does, and it starts above a floor
 * that survives Redis (see api/order-floor.ts), so a Redis reset, a failover or a new queue
 * cannot make a later write look older than an earlier one.
 */
export const ORDER_EPOCH_MS = Date.UTC(2024, 0, 1);
const NODE_BITS = 6;
/** How many node numbers exist: at most this many API processes of one host can mint orders that never tie. */
export const ORDER_CLOCK_NODES = 2 ** NODE_BITS;
const COUNTER_BITS = 7;
const TICK = 2 ** (NODE_BITS + COUNTER_BITS);
const COUNTER_UNIT = 2 ** NODE_BITS;
const MAX_COUNTER = 2 ** COUNTER_BITS - 1;
const MAX_MS = Math.floor(Number.MAX_SAFE_INTEGER / TICK);

/** The node number of the clock that minted `order`. */
export function orderNode(order: number): number {
  return order % ORDER_CLOCK_NODES;
}

/**
 * Node numbers for the `count` API processes of one host: consecutive from `base`, wrapping, so
 * that they are distinct (orders of two processes never tie) for up to {@link ORDER_CLOCK_NODES}.
 */
export function clusterOrderNodes(base: number, count: number): number[] {
  if (count > ORDER_CLOCK_NODES) throw new RangeError(`at most ${ORDER_CLOCK_NODES} processes per host`);
  return Array.from({ length: count }, (_, slot) => (base + slot) % ORDER_CLOCK_NODES);
}

/** The wall-clock time, ms since the Unix epoch, at which `order` was minted (to the ms). */
export function orderTime(order: number): number {
  return Math.floor(order / TICK) + ORDER_EPOCH_MS;
}

/** The smallest order a clock at `unixMs` can mint: orders below it were minted earlier. */
export function orderFloorAt(unixMs: number): number {
  return Math.max(0, unixMs - ORDER_EPOCH_MS) * TICK;
}

export interface OrderClock {
  /** A new order, greater than every order this clock minted before and than its floor. */
  next(): number;
  /** The greatest order minted so far (or the floor), for persisting. */
  last(): number;
  /** Raises the floor: every later order is greater than `order`. */
  raiseFloor(order: number): void;
  /** This clock's node number (the low bits of every order it mints). */
  readonly node: number;
}

interface OrderClockOptions {
  /** Wall clock, ms since the Unix epoch. Default `Date.now`. */
  readonly now?: () => number;
  /** 0–63; default random. Breaks ties between processes minting in the same ms. */
  readonly node?: number;
}

export function createOrderClock(options: OrderClockOptions = {}): OrderClock {
  const now = options.now ?? Date.now;
  const node = options.node ?? randomInt(0, 2 ** NODE_BITS);
  if (!Number.isInteger(node) || node < 0 || node >= 2 ** NODE_BITS) throw new RangeError(`node must be 0-${2 ** NODE_BITS - 1}`);
  let lastMs = 0;
  let counter = 0;
  let lastOrder = 0;
  return {
    next() {
      const ms = Math.max(0, now() - ORDER_EPOCH_MS);
      if (ms > lastMs) {
        lastMs = ms;
        counter = 0;
      } else if (counter < MAX_COUNTER) counter++;
      else {
        // 128 writes in one ms of this process: borrow the next ms (the clock runs ahead a little).
        lastMs++;
        counter = 0;
      }
      if (lastMs > MAX_MS) throw new RangeError('the order clock is past its 40-bit range (year 2058)');
      lastOrder = lastMs * TICK + counter * COUNTER_UNIT + node;
      return lastOrder;
    },
    node,
    last: () => lastOrder,
    raiseFloor(order) {
      if (order <= lastOrder) return;
      // The next order lands in a later ms than the floor's, so it is greater whatever the node.
      lastMs = Math.max(lastMs, Math.floor(order / TICK));
      counter = MAX_COUNTER;
      lastOrder = order;
    },
  };
}
