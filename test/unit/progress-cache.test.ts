import { expect } from 'chai';
import { createProgressCache, type ProgressCacheSettings } from '../../api/progress-cache.js';

describe('progress cache: large datasets counted at most so often', () => {
  let t: number;
  let computes: number;
  const settings = (): ProgressCacheSettings => ({ cacheFromMs: 200, ttlFactor: 10, maxTtlMs: 60_000, maxStaleFactor: 3, maxEntries: 2, now: () => t });
  /** A count that takes `took` ms on the fake clock and answers how many counts ran. */
  const counting = (took: number) => async () => {
    computes++;
    const n = computes;
    await Promise.resolve();
    t += took;
    return n;
  };
  const settle = () => new Promise((r) => setImmediate(r));
  beforeEach(() => {
    t = 1_000_000;
    computes = 0;
  });

  it('a count quicker than cacheFromMs is never kept: every call counts', async () => {
    const cache = createProgressCache<number>(settings());
    expect((await cache.get('ds', counting(199))).value).to.equal(1);
    expect((await cache.get('ds', counting(199))).value).to.equal(2);
    expect(computes).to.equal(2);
  });

  it('a slow count is served for ttlFactor times as long as it took, then once more while one new count runs', async () => {
    const cache = createProgressCache<number>(settings());
    const first = await cache.get('ds', counting(1_000));
    expect(first.value).to.equal(1);
    expect(first.asOf.getTime()).to.equal(1_000_000);
    t += 9_999;
    expect((await cache.get('ds', counting(1_000))).value, 'within the TTL').to.equal(1);
    expect(computes).to.equal(1);
    t += 2;
    // Expired: the kept counts come back at once, and one count (not one per call) starts.
    expect((await cache.get('ds', counting(1_000))).value).to.equal(1);
    expect((await cache.get('ds', counting(1_000))).value).to.equal(1);
    await settle();
    expect(computes).to.equal(2);
    expect((await cache.get('ds', counting(1_000))).value, 'the new count once done').to.equal(2);
  });

  it('past maxStaleFactor TTLs a call waits for a new count', async () => {
    const cache = createProgressCache<number>(settings());
    await cache.get('ds', counting(1_000));
    t += 30_001;
    expect((await cache.get('ds', counting(1_000))).value).to.equal(2);
  });

  it('the TTL is capped at maxTtlMs', async () => {
    const cache = createProgressCache<number>(settings());
    await cache.get('ds', counting(10_000));
    t += 60_001;
    await cache.get('ds', counting(10_000));
    await settle();
    expect(computes).to.equal(2);
  });

  it('concurrent calls for one dataset share one count; datasets are counted apart, the oldest dropped past maxEntries', async () => {
    const cache = createProgressCache<number>(settings());
    const [a, b] = await Promise.all([cache.get('ds', counting(500)), cache.get('ds', counting(500))]);
    expect([a.value, b.value, computes]).to.deep.equal([1, 1, 1]);
    await cache.get('other', counting(500));
    await cache.get('third', counting(500));
    expect(computes).to.equal(3);
    expect((await cache.get('other', counting(500))).value, 'kept').to.equal(2);
    expect((await cache.get('ds', counting(500))).value, 'dropped: counted again').to.equal(4);
  });
});
