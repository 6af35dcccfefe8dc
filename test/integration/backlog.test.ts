import { expect } from 'chai';
import { testConfig } from '../helpers/env.js';
import { eventually, recordBody, records, startStack, type Stack } from '../helpers/stack.js';

describe('backlog ceiling (BACKLOG_MAX_JOBS): 503 overloaded above it, through HTTP', () => {
  let stack: Stack;
  before(async () => {
    // No worker: every write waits in Redis. Calls one at a time: each is a job of its own.
    stack = await startStack(testConfig({ BACKLOG_MAX_JOBS: '3', BACKLOG_POLL_MS: '100' }), { worker: false });
  });
  after(async () => {
    await stack?.close();
  });

  const readyz = async () => (await stack.request('/readyz', { method: 'GET' })) as { status: number; body: { backlog_jobs?: number; overloaded?: boolean } };
  /** Waits until the API's backlog monitor has seen `jobs` jobs waiting. */
  const seen = (jobs: number) => eventually(async () => ((await readyz()).body.backlog_jobs === jobs ? true : undefined), 10_000, `backlog of ${jobs} jobs seen`);

  it('accepts writes while the backlog is at or below the ceiling, refuses them above it with Retry-After, and accepts again once it drains', async () => {
    const statuses: number[] = [];
    for (let jobs = 0; jobs <= 3; jobs++) {
      await seen(jobs);
      const res = await stack.post('/feedback-record', recordBody({ record: { external_id: `w${jobs}` } }));
      statuses.push(res.status);
    }
    // 0, 1, 2 and 3 jobs waiting: not above 3.
    expect(statuses).to.deep.equal([200, 200, 200, 200]);

    await seen(4);
    const refused = await stack.post('/feedback-record', recordBody({ record: { external_id: 'refused' } }));
    expect(refused.status).to.equal(503);
    expect(refused.body.error.code).to.equal('overloaded');
    expect(refused.headers.get('retry-after')).to.match(/^\d+$/);
    const ready = await readyz();
    expect(ready.status).to.equal(503);
    expect(ready.body.overloaded).to.equal(true);

    await stack.startWorker();
    await seen(0);
    const again = await stack.post('/feedback-record', recordBody({ record: { external_id: 'after' } }));
    expect(again.status).to.equal(200);
    expect((await readyz()).status).to.equal(200);
    // What was answered 200 is stored; the refused write is not.
    await eventually(async () => ((await records(stack.db).countDocuments({})) === 5 ? true : undefined), 20_000, 'five records stored');
    expect(await records(stack.db).countDocuments({ external_id: 'refused' })).to.equal(0);
  });
});
