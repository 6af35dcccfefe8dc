import { expect } from 'chai';
import { Redis } from 'ioredis';
import { sharedServices } from '../helpers/root-hooks.js';
import { testConfig, uniqueName } from '../helpers/env.js';
import { eventually, recordBody, records, responses, startStack, type Stack } from '../helpers/stack.js';

/** Every key of the shared Redis (SCAN, not KEYS: the server is shared by the whole run). */
async function allKeys(redis: Redis): Promise<string[]> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await redis.scan(cursor, 'COUNT', 1000);
    keys.push(...batch);
    cursor = next;
  } while (cursor !== '0');
  return keys;
}

describe('REDIS_KEY_PREFIX (two deployments on one Redis)', () => {
  const stacks: Stack[] = [];
  let redis: Redis;
  // The same QUEUE_NAME on purpose: only the prefix tells the two deployments apart.
  const queueName = uniqueName('shared');
  const prefixA = uniqueName('appA');
  const prefixB = uniqueName('appB');

  before(async () => {
    redis = new Redis(sharedServices().redisUrl);
    for (const prefix of [prefixA, prefixB]) {
      stacks.push(await startStack(testConfig({ QUEUE_NAME: queueName, REDIS_KEY_PREFIX: prefix, RATE_LIMIT_PER_MINUTE: '3' }), { worker: false }));
    }
  });
  after(async () => {
    await Promise.all(stacks.map((s) => s.close()));
    redis.disconnect();
  });

  it("keeps each deployment's queue, idempotency keys and rate limits apart; every key it writes carries its prefix", async () => {
    const [a, b] = stacks as [Stack, Stack];
    // A writes with an Idempotency-Key while no worker runs: its job waits in A's queue.
    const first = await a.post('/feedback-record', recordBody({ record: { external_id: 'from-a' } }), { 'Idempotency-Key': 'same-key' });
    expect(first.status).to.equal(200);
    // The same key with another body at B is a new write there, not a 409 or a replay of A's answer.
    const atB = await b.post('/feedback-record', recordBody({ record: { external_id: 'from-b' } }), { 'Idempotency-Key': 'same-key' });
    expect(atB.status).to.equal(200);
    expect(atB.headers.get('Idempotent-Replayed')).to.equal(null);
    expect(atB.body.feedback_record_id).to.not.equal(first.body.feedback_record_id);
    // Rate limits (3 a minute, same key name at both): A's two requests left B's budget whole.
    expect(atB.headers.get('RateLimit-Remaining')).to.equal('2');

    // Each worker drains its own deployment's queue only.
    await a.startWorker();
    await b.startWorker();
    const storedAt = (s: Stack, externalId: string) => eventually(async () => ((await records(s.db).countDocuments({ external_id: externalId })) === 1 ? true : undefined), 20_000, `${externalId} stored`);
    await Promise.all([storedAt(a, 'from-a'), storedAt(b, 'from-b')]);
    expect(await records(a.db).countDocuments({})).to.equal(1);
    expect(await records(b.db).countDocuments({})).to.equal(1);
    expect(await responses(a.db).countDocuments({ feedback_record_id: atB.body.feedback_record_id })).to.equal(0);

    const keys = (await allKeys(redis)).filter((k) => k.includes(queueName));
    const ofA = keys.filter((k) => k.startsWith(`${prefixA}:`));
    const ofB = keys.filter((k) => k.startsWith(`${prefixB}:`));
    expect(ofA.some((k) => k.startsWith(`${prefixA}:bull:${queueName}:`)), 'A queue keys').to.equal(true);
    expect(ofA.some((k) => k.startsWith(`${prefixA}:feedback-ingest:${queueName}:idem:`)), 'A idempotency keys').to.equal(true);
    expect(ofA.some((k) => k.startsWith(`${prefixA}:feedback-ingest:${queueName}:ratelimit:`)), 'A rate-limit keys').to.equal(true);
    expect(ofB.length).to.be.greaterThan(0);
    // Nothing of either deployment lives outside its prefix.
    expect(keys.filter((k) => !ofA.includes(k) && !ofB.includes(k))).to.deep.equal([]);
  });

  it('unset, writes the keys of earlier releases (bull:<queue>:…, feedback-ingest:<queue>:…)', async () => {
    const s = await startStack(testConfig({ RATE_LIMIT_PER_MINUTE: '3' }), { worker: false });
    stacks.push(s);
    const res = await s.post('/feedback-record', recordBody(), { 'Idempotency-Key': 'k1' });
    expect(res.status).to.equal(200);
    const q = s.config.queueName;
    const keys = (await allKeys(redis)).filter((k) => k.includes(q));
    expect(keys).to.include(`bull:${q}:wait`);
    expect(keys.some((k) => k.startsWith(`feedback-ingest:${q}:idem:`))).to.equal(true);
    expect(keys.some((k) => k.startsWith(`feedback-ingest:${q}:ratelimit:`))).to.equal(true);
    expect(keys.every((k) => k.startsWith(`bull:${q}:`) || k.startsWith(`feedback-ingest:${q}:`))).to.equal(true);
  });
});
