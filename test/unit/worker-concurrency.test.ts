import { expect } from 'chai';
import { concurrencyPerShard, createJobSizeAverage } from '../../worker/concurrency.js';

describe('worker concurrency by job size (WORKER_WRITES_IN_HAND)', () => {
  const limits = { maxJobs: 256, writesInHand: 4000, shards: 1 };

  it('holds many small jobs and few large ones, within one per shard and WORKER_CONCURRENCY', () => {
    expect(concurrencyPerShard(3, limits)).to.equal(256);
    expect(concurrencyPerShard(200, limits)).to.equal(20);
    expect(concurrencyPerShard(1000, limits)).to.equal(4);
    expect(concurrencyPerShard(100_000, limits)).to.equal(1);
    expect(concurrencyPerShard(3, { ...limits, shards: 6 })).to.equal(43);
    expect(concurrencyPerShard(100_000, { ...limits, shards: 6 })).to.equal(1);
  });

  it('the average follows the jobs: from the initial 16 jobs to 256 after a few dozen small jobs', () => {
    const avg = createJobSizeAverage(4000 / 16);
    expect(concurrencyPerShard(avg.value, limits)).to.equal(16);
    let n = 0;
    while (concurrencyPerShard(avg.value, limits) < 256 && n < 1000) {
      avg.observe(3);
      n++;
    }
    expect(n).to.be.within(20, 60);
  });
});
