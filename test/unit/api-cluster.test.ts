import { expect } from 'chai';
import { restartDelay, RESTART_DELAY_MS, RESTART_MAX_DELAY_MS } from '../../api/cluster.js';
import { loadConfig } from '../../shared/config.js';
import { mongoDurabilityOptions } from '../../shared/mongo.js';
import { clusterOrderNodes, createOrderClock, orderNode, ORDER_CLOCK_NODES } from '../../shared/order-clock.js';

describe('API processes of one host (api/cluster.ts, shared/order-clock.ts)', () => {
  it('gives every process of a host its own order-clock node, wrapping past 63', () => {
    for (const base of [0, 17, 63]) {
      for (const size of [1, 2, 8, ORDER_CLOCK_NODES]) {
        const nodes = clusterOrderNodes(base, size);
        expect(new Set(nodes).size, `base ${base}, ${size} processes`).to.equal(size);
        for (const n of nodes) expect(n).to.be.within(0, ORDER_CLOCK_NODES - 1);
      }
    }
    expect(clusterOrderNodes(62, 3)).to.deep.equal([62, 63, 0]);
    expect(() => clusterOrderNodes(0, ORDER_CLOCK_NODES + 1)).to.throw(RangeError);
  });

  it('two processes with distinct nodes never mint the same order, even in the same millisecond', () => {
    const now = Date.UTC(2026, 10, 23, 22);
    const [n1, n2] = clusterOrderNodes(40, 2) as [number, number];
    const a = createOrderClock({ now: () => now, node: n1 });
    const b = createOrderClock({ now: () => now, node: n2 });
    const fromA = Array.from({ length: 500 }, () => a.next());
    const fromB = new Set(Array.from({ length: 500 }, () => b.next()));
    expect(fromA.filter((o) => fromB.has(o))).to.deep.equal([]);
    expect(orderNode(fromA[0]!)).to.equal(n1);
  });

  it('WEB_CONCURRENCY is at most the number of order-clock nodes', () => {
    expect(loadConfig({}).webConcurrency).to.equal(1);
    expect(loadConfig({ WEB_CONCURRENCY: String(ORDER_CLOCK_NODES) }).webConcurrency).to.equal(ORDER_CLOCK_NODES);
    expect(() => loadConfig({ WEB_CONCURRENCY: String(ORDER_CLOCK_NODES + 1) })).to.throw(/WEB_CONCURRENCY/);
    expect(() => loadConfig({ WEB_CONCURRENCY: '0' })).to.throw(/WEB_CONCURRENCY/);
    expect(loadConfig({}).orderClockNode).to.equal(undefined);
    expect(() => loadConfig({ ORDER_CLOCK_NODE: '64' })).to.throw(/ORDER_CLOCK_NODE/);
  });

  it('replaces a dying process after a delay that doubles per death in a row, up to a cap', () => {
    expect(restartDelay(1)).to.equal(RESTART_DELAY_MS);
    expect(restartDelay(2)).to.equal(2 * RESTART_DELAY_MS);
    expect(restartDelay(4)).to.equal(8 * RESTART_DELAY_MS);
    expect(restartDelay(1000)).to.equal(RESTART_MAX_DELAY_MS);
  });
});

describe('MongoDB durability settings (shared/mongo.ts)', () => {
  it('by default sets no write concern (the URI or the server decides) and reads from the primary', () => {
    expect(mongoDurabilityOptions(loadConfig({}))).to.deep.equal({ readPreference: 'primary' });
  });

  it('maps w, journal and the read preference to the driver options', () => {
    const config = loadConfig({ MONGODB_WRITE_CONCERN: 'majority', MONGODB_JOURNAL: 'true', MONGODB_READ_PREFERENCE: 'secondaryPreferred' });
    expect(mongoDurabilityOptions(config)).to.deep.equal({ w: 'majority', journal: true, readPreference: 'secondaryPreferred' });
    expect(mongoDurabilityOptions(loadConfig({ MONGODB_WRITE_CONCERN: '1' }))).to.deep.equal({ w: 1, readPreference: 'primary' });
  });

  it('refuses a write concern that does not wait for an acknowledgement', () => {
    expect(() => loadConfig({ MONGODB_WRITE_CONCERN: '0' })).to.throw(/MONGODB_WRITE_CONCERN/);
    expect(() => loadConfig({ MONGODB_READ_PREFERENCE: 'secondary-ish' })).to.throw(/MONGODB_READ_PREFERENCE/);
  });
});
