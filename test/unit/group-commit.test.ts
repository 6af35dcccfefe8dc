import { expect } from 'chai';
import { createGroupCommit } from '../../shared/group-commit.js';

describe('group commit', () => {
  it('gathers what is submitted while a batch commits, within the item and weight limits, in order', async () => {
    const batches: number[][] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const gc = createGroupCommit<number, string>({
      maxItems: 3,
      maxWeight: 10,
      weight: (n) => n,
      maxInFlight: 1,
      async commit(batch) {
        batches.push([...batch]);
        if (batches.length === 1) await gate;
        return batch.map((n) => `ok ${n}`);
      },
    });
    const first = gc.submit(1);
    await new Promise((r) => setImmediate(r));
    const rest = [2, 3, 4, 9, 11, 1].map((n) => gc.submit(n));
    expect(gc.waiting()).to.deep.equal({ items: 6, weight: 30 });
    release();
    expect(await first).to.equal('ok 1');
    expect(await Promise.all(rest)).to.deep.equal(['ok 2', 'ok 3', 'ok 4', 'ok 9', 'ok 11', 'ok 1']);
    // 2+3+4 fills the 3 items; 9 alone (9+11 > 10); 11 alone, heavier than the limit; then 1.
    expect(batches).to.deep.equal([[1], [2, 3, 4], [9], [11], [1]]);
  });

  it('rejects every item of a batch whose commit fails, and goes on with the next', async () => {
    let calls = 0;
    const gc = createGroupCommit<number, number>({ maxItems: 10, maxInFlight: 1, commit: async (b) => (++calls === 1 ? Promise.reject(new Error('down')) : b) });
    const a = gc.submit(1);
    const b = gc.submit(2);
    const settled = await Promise.allSettled([a, b]);
    expect(settled.map((s) => (s.status === 'rejected' ? (s.reason as Error).message : 'fulfilled'))).to.deep.equal(['down', 'down']);
    expect(await gc.submit(3)).to.equal(3);
    expect(calls).to.equal(2);
  });

  it('takes out an item whose deadline passes while it waits, with the given error, and never commits it', async () => {
    const committed: number[] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const gc = createGroupCommit<number, number>({
      maxItems: 10,
      maxInFlight: 1,
      async commit(batch) {
        committed.push(...batch);
        await gate;
        return batch;
      },
    });
    const blocker = gc.submit(1);
    await new Promise((r) => setImmediate(r));
    const late = gc.submit(2, { deadline: Date.now() + 30, expired: () => new Error('not sent in time') });
    const outcome = await late.then(() => 'committed', (e: Error) => e.message);
    expect(outcome).to.equal('not sent in time');
    expect(gc.waiting().items).to.equal(0);
    release();
    await blocker;
    await gc.drain();
    expect(committed).to.deep.equal([1]);
  });

  it('drain resolves once nothing waits or commits', async () => {
    const gc = createGroupCommit<number, number>({ maxItems: 2, maxInFlight: 2, commit: async (b) => b });
    const all = [1, 2, 3, 4, 5].map((n) => gc.submit(n));
    await gc.drain();
    expect(gc.waiting().items).to.equal(0);
    expect(await Promise.all(all)).to.deep.equal([1, 2, 3, 4, 5]);
  });
  it('keeps an item waiting past its deadline while commits go on succeeding, and expires it once none has for its window', async () => {
    // A committer that takes 20 ms a batch of 1: the last of 40 items waits ~800 ms, four times its 200 ms window.
    const gc = createGroupCommit<number, number>({ maxItems: 1, maxInFlight: 1, commit: async (b) => (await new Promise((r) => setTimeout(r, 20)), b) });
    const started = Date.now();
    const all = Array.from({ length: 40 }, (_, n) => gc.submit(n, { deadline: Date.now() + 200, expired: () => new Error('expired') }));
    expect(await Promise.all(all)).to.deep.equal(Array.from({ length: 40 }, (_, n) => n));
    expect(Date.now() - started, 'the last ones waited past their deadline').to.be.above(200);

    // A committer that stopped answering: what waits behind its batch expires within its window.
    let release!: () => void;
    const stuck = createGroupCommit<number, number>({ maxItems: 1, maxInFlight: 1, commit: async (b) => (await new Promise<void>((r) => (release = r)), b) });
    const blocker = stuck.submit(1);
    await new Promise((r) => setImmediate(r));
    const stuckAt = Date.now();
    const waiting = await stuck.submit(2, { deadline: Date.now() + 40, expired: () => new Error('expired') }).then(() => 'committed', (e: Error) => e.message);
    expect(waiting).to.equal('expired');
    expect(Date.now() - stuckAt).to.be.below(2_000);
    release();
    await blocker;
  });
});
