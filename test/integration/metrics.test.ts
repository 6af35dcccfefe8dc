import { expect } from 'chai';
import { testConfig } from '../helpers/env.js';
import { freePort } from '../../devkit/servers.js';
import { eventually, recordBody, startStack, type Stack } from '../helpers/stack.js';

/** The value of one sample line (`name{labels} value`) whose labels include all of `labels`. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  const line = text.split('\n').find((l) => (l.startsWith(`${name}{`) || l.startsWith(`${name} `)) && Object.entries(labels).every(([k, v]) => l.includes(`${k}="${v}"`)));
  return line === undefined ? undefined : Number(line.split(' ').pop());
}

describe('metrics scraped after traffic (API /metrics and the worker metrics port)', function () {
  this.timeout(30_000);
  let stack: Stack;
  let workerPort: number;
  before(async () => {
    workerPort = await freePort();
    stack = await startStack(testConfig({ WORKER_METRICS_PORT: String(workerPort) }), { worker: false });
  });
  after(async () => {
    await stack?.close();
  });

  const scrapeApi = async () => (await stack.request('/metrics', { method: 'GET' })).text;
  const scrapeWorker = async () => {
    const res = await fetch(`http://127.0.0.1:${workerPort}/metrics`);
    expect(res.status).to.equal(200);
    return res.text();
  };

  it('the API reports queue depth by state, for autoscaling workers on backlog', async () => {
    for (let i = 0; i < 3; i++) expect((await stack.post('/feedback-record', recordBody())).status).to.equal(200);
    const text = await scrapeApi();
    expect(text).to.include('# TYPE feedback_api_queue_jobs gauge');
    // No worker yet: the jobs carrying the three writes wait (one to three jobs, by batching).
    expect(sample(text, 'feedback_api_queue_jobs', { state: 'waiting' })).to.be.within(1, 3);
    for (const state of ['active', 'delayed', 'failed']) expect(sample(text, 'feedback_api_queue_jobs', { state }), state).to.equal(0);
    expect(sample(text, 'feedback_api_enqueue_batch_size_count')).to.be.at.least(1);
  });

  it('the worker reports jobs, writes, batch sizes, write latency and end-to-end lag once it has stored them', async () => {
    await stack.startWorker();
    const text = await eventually(async () => {
      const t = await scrapeWorker();
      return (sample(t, 'feedback_worker_writes_total', { outcome: 'record' }) ?? 0) >= 3 ? t : undefined;
    }, 15_000, 'the worker to store the 3 writes');
    expect(sample(text, 'feedback_worker_jobs_total', { outcome: 'completed' })).to.be.at.least(1);
    expect(sample(text, 'feedback_worker_lag_seconds_count')).to.be.at.least(3);
    expect(sample(text, 'feedback_worker_write_duration_seconds_count')).to.be.at.least(1);
    expect(sample(text, 'feedback_worker_batch_size_sum')).to.be.at.least(3);
    const api = await eventually(async () => {
      const t = await scrapeApi();
      return sample(t, 'feedback_api_queue_jobs', { state: 'waiting' }) === 0 ? t : undefined;
    }, 15_000, 'the API to see an empty queue');
    expect(sample(api, 'feedback_api_queue_jobs', { state: 'active' })).to.equal(0);
  });
});
