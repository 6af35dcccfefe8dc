import { expect } from 'chai';
import { inChunks } from '../../worker/store-chunks.js';

describe('inChunks (worker/store-chunks.ts)', () => {
  it('sends contiguous slices of at most the size, all at once, and returns results in the items order', async () => {
    const items = Array.from({ length: 23 }, (_, i) => i);
    const slices: number[][] = [];
    let inFlight = 0;
    let most = 0;
    const results = await inChunks(items, 5, async (slice) => {
      slices.push([...slice]);
      most = Math.max(most, ++inFlight);
      // The later slices answer first: the order of the results must not follow the answers.
      await new Promise((r) => setTimeout(r, 30 - slice[0]!));
      inFlight--;
      return slice.map((x) => x * 10);
    });
    expect(results).to.deep.equal(items.map((x) => x * 10));
    expect(slices.map((s) => s.length)).to.deep.equal([5, 5, 5, 5, 3]);
    for (const s of slices) expect(s).to.deep.equal(s.slice().sort((a, b) => a - b));
    expect(most).to.equal(5);
  });

  it('one slice when the items fit, and a slice that throws rejects the whole', async () => {
    let calls = 0;
    expect(await inChunks([1, 2], 5, async (s) => (calls++, [...s]))).to.deep.equal([1, 2]);
    expect(calls).to.equal(1);
    const err = await inChunks([1, 2, 3, 4], 2, async (s) => {
      if (s[0] === 3) throw new Error('store gone');
      return [...s];
    }).then(() => undefined, (e: unknown) => e);
    expect((err as Error).message).to.equal('store gone');
  });
});
