import { expect } from 'chai';
import { createShardActivity, createShardWatch, type ShardObservation } from '../../worker/shard-watch.js';

/** Pure logic: when a shard's BullMQ worker is taken for stuck (worker/shard-watch.ts). */
describe('shard watch', () => {
  const stuckMs = 30_000;
  const idle = (over: Partial<ShardObservation> = {}): ShardObservation => ({ inHand: 0, lastStartAt: 0, waiting: 5, rateLimitMs: 0, ...over });

  it('jobs waiting, none in hand, none started for stuckMs: stuck, and not before', () => {
    const w = createShardWatch(stuckMs);
    expect(w.check(idle(), 1_000)).to.equal('suspect');
    expect(w.check(idle(), 1_000 + stuckMs - 1)).to.equal('suspect');
    expect(w.check(idle(), 1_000 + stuckMs)).to.equal('stuck');
  });

  it('a job started since the suspicion began: the loop moves, the watch starts over', () => {
    const w = createShardWatch(stuckMs);
    expect(w.check(idle(), 1_000)).to.equal('suspect');
    expect(w.check(idle({ lastStartAt: 20_000 }), 25_000)).to.equal('suspect');
    expect(w.check(idle({ lastStartAt: 20_000 }), 25_000 + stuckMs - 1)).to.equal('suspect');
    expect(w.check(idle({ lastStartAt: 20_000 }), 25_000 + stuckMs)).to.equal('stuck');
  });

  for (const [what, over] of [
    ['a job in hand (busy, not stuck)', { inHand: 1 }],
    ['nothing waiting', { waiting: 0 }],
    ['the queue rate-limited (paused while MongoDB is down)', { rateLimitMs: 500 }],
  ] as const) {
    it(`${what}: never stuck, and the suspicion ends`, () => {
      const w = createShardWatch(stuckMs);
      expect(w.check(idle(), 0)).to.equal('suspect');
      expect(w.check(idle(over), stuckMs * 2)).to.equal('ok');
      // Suspicion starts over from here, not from 0.
      expect(w.check(idle(), stuckMs * 2 + 1)).to.equal('suspect');
      expect(w.check(idle(), stuckMs * 3)).to.equal('suspect');
      expect(w.check(idle(), stuckMs * 3 + 1)).to.equal('stuck');
    });
  }

  it('reset: after a replacement the new worker gets stuckMs of its own', () => {
    const w = createShardWatch(stuckMs);
    w.check(idle(), 0);
    expect(w.check(idle(), stuckMs)).to.equal('stuck');
    w.reset();
    expect(w.check(idle(), stuckMs + 1)).to.equal('suspect');
    expect(w.check(idle(), 2 * stuckMs)).to.equal('suspect');
  });

  it('activity counts the jobs in hand and when the last one started, also when a job throws', async () => {
    let t = 100;
    const a = createShardActivity(() => t);
    let release!: () => void;
    const held = a.track(() => new Promise<void>((r) => (release = r)));
    expect([a.inHand(), a.lastStartAt()]).to.deep.equal([1, 100]);
    t = 200;
    await a.track(() => Promise.reject(new Error('store down'))).catch(() => undefined);
    expect([a.inHand(), a.lastStartAt()]).to.deep.equal([1, 200]);
    release();
    await held;
    expect(a.inHand()).to.equal(0);
  });
});
