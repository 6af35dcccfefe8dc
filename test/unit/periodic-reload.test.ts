import { expect } from 'chai';
import { createPeriodicReload } from '../../api/periodic-reload.js';
import { createLogger } from '../../shared/logger.js';

/*
 * A reload asked for after a write must see that write, even while a periodic load that read
 * before it is still in flight (issue 22: a PUT /datasets narrowing a label was undone for one
 * refresh period when it joined such a load). The "store" here is a variable; each load reads it
 * when it starts and applies what it read when it ends, as the dataset store does.
 */
describe('periodic reload', () => {
  function harness() {
    let stored = 'v1';
    let applied = 'none';
    let loads = 0;
    const releases: (() => void)[] = [];
    const reload = createPeriodicReload({
      async load() {
        loads++;
        const read = stored;
        await new Promise<void>((res) => releases.push(res));
        applied = read;
        return 1;
      },
      refreshMs: 60_000,
      logger: createLogger({ level: 'silent', name: 'test' }),
      what: 'things',
      held: () => 1,
    });
    const releaseAll = async () => {
      // Each release lets one load end; a load queued behind it then starts and waits in turn.
      for (let i = 0; i < 10 && (releases.length > 0 || i === 0); i++) {
        while (releases.length > 0) releases.shift()!();
        await new Promise((r) => setImmediate(r));
      }
    };
    return {
      reload,
      write: (v: string) => (stored = v),
      applied: () => applied,
      loads: () => loads,
      releaseAll,
    };
  }

  it('a refresh asked for during a load that read before a write applies that write', async () => {
    const h = harness();
    const early = h.reload.refresh(); // a periodic load: reads v1
    h.write('v2'); // the PUT's store write
    const afterWrite = h.reload.refresh(); // the PUT asks for a reload
    await h.releaseAll();
    await early;
    await afterWrite;
    expect(h.applied()).to.equal('v2');
    expect(h.loads()).to.equal(2);
  });

  it('callers that come while a follow-up load waits share it', async () => {
    const h = harness();
    const first = h.reload.refresh();
    h.write('v2');
    const a = h.reload.refresh();
    const b = h.reload.refresh();
    expect(a).to.equal(b);
    await h.releaseAll();
    await Promise.all([first, a, b]);
    expect(h.loads()).to.equal(2);
    expect(h.applied()).to.equal('v2');
  });

  it('a refresh with nothing in flight loads once', async () => {
    const h = harness();
    const p = h.reload.refresh();
    await h.releaseAll();
    expect(await p).to.equal(true);
    expect(h.loads()).to.equal(1);
  });
});
