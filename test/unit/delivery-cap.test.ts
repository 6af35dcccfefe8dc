import { expect } from 'chai';
import { deliveryCap, IN_FLIGHT_WHILE_WRITING } from '../../worker/webhook-dispatcher.js';

describe('deliveryCap: deliveries yield to a burst of writes, then take a bounded share', () => {
  const max = 400;
  const yieldMs = 10_000;
  it('no backlog: every delivery the endpoint may have in flight', () => {
    expect(deliveryCap(max, yieldMs, undefined, 1_000_000)).to.equal(max);
  });
  it('during the first yieldMs of a backlog: none', () => {
    expect(deliveryCap(max, yieldMs, 1_000_000, 1_000_000)).to.equal(0);
    expect(deliveryCap(max, yieldMs, 1_000_000, 1_000_000 + yieldMs - 1)).to.equal(0);
  });
  it('a backlog longer than yieldMs: the bounded share, never more than the endpoint\'s maximum', () => {
    expect(deliveryCap(max, yieldMs, 1_000_000, 1_000_000 + yieldMs)).to.equal(IN_FLIGHT_WHILE_WRITING);
    expect(deliveryCap(10, yieldMs, 1_000_000, 1_000_000 + yieldMs)).to.equal(Math.min(10, IN_FLIGHT_WHILE_WRITING));
  });
  it('yieldMs 0: the bounded share at once', () => {
    expect(deliveryCap(max, 0, 1_000_000, 1_000_000)).to.equal(IN_FLIGHT_WHILE_WRITING);
  });
});
