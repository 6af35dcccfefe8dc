import { expect } from 'chai';
import { createOrderClock, orderFloorAt, orderTime, ORDER_EPOCH_MS } from '../../shared/order-clock.js';

describe('acceptance order clock', () => {
  it('mints strictly increasing safe integers, also when the wall clock stands still or steps back', () => {
    let now = Date.UTC(2026, 10, 23, 12);
    const clock = createOrderClock({ now: () => now, node: 5 });
    const seen: number[] = [];
    for (let i = 0; i < 300; i++) seen.push(clock.next()); // same ms: past 128 it borrows the next ms
    now -= 60_000; // NTP steps the clock back a minute
    for (let i = 0; i < 10; i++) seen.push(clock.next());
    now += 120_000;
    seen.push(clock.next());
    for (let i = 1; i < seen.length; i++) expect(seen[i]!, `order ${i}`).to.be.greaterThan(seen[i - 1]!);
    for (const o of seen) expect(Number.isSafeInteger(o)).to.equal(true);
    expect(orderTime(seen.at(-1)!)).to.equal(now);
  });

  it('orders writes of different processes by their time, to the millisecond', () => {
    let now = Date.UTC(2026, 0, 1);
    const a = createOrderClock({ now: () => now, node: 63 });
    const b = createOrderClock({ now: () => now, node: 0 });
    const first = a.next();
    now += 1;
    expect(b.next()).to.be.greaterThan(first);
  });

  it('starts above a raised floor even when its wall clock is behind it', () => {
    const now = Date.UTC(2026, 0, 1);
    const clock = createOrderClock({ now: () => now, node: 1 });
    const floor = orderFloorAt(now + 3_600_000);
    clock.raiseFloor(floor);
    const next = clock.next();
    expect(next).to.be.greaterThan(floor);
    expect(clock.last()).to.equal(next);
    clock.raiseFloor(0); // a lower floor changes nothing
    expect(clock.next()).to.be.greaterThan(next);
  });

  it('lays out time, counter and node as documented', () => {
    const now = ORDER_EPOCH_MS + 1000;
    const clock = createOrderClock({ now: () => now, node: 7 });
    expect(clock.next()).to.equal(1000 * 2 ** 13 + 7);
    expect(clock.next()).to.equal(1000 * 2 ** 13 + 64 + 7);
    expect(() => createOrderClock({ node: 64 })).to.throw(RangeError);
  });
});
