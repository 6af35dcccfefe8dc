import assert from 'node:assert/strict';
import { OVERSIZE_BODY_LIMIT_BYTES, OVERSIZE_TEXT } from '../helpers/oversize.js';
import { Cluster, LEDGER_KEY, until } from './cluster.js';
import { send, type HttpAnswer } from './http.js';
import { recordScenario } from './report.js';
import { COLLECTIONS } from '../../shared/mongo.js';

/**
 * Redis loses everything (a new, empty server on the same port: a host crash under AOF everysec
 * with its file lost, a failover to a blank replica, a FLUSHALL, a restore of an old backup).
 * BullMQ's job-id counter starts again at 1 then; the acceptance order of writes must not.
 */
describe('Redis replaced by an empty one (the acceptance order survives it)', function () {
  let cluster: Cluster | undefined;
  afterEach(async function () {
    this.timeout(60_000);
    await cluster?.close();
    cluster = undefined;
  });

  const headers = { 'Content-Type': 'application/json', Authorization: `Bearer ${LEDGER_KEY.secret}` };
  const counts = { requests: 0, acknowledged: 0, refused: 0 };
  /** Posts until the API answers 200 (it answers 503 while it reconnects to the new Redis). */
  async function postOk(url: string, path: string, body: unknown): Promise<HttpAnswer> {
    return until(async () => {
      const res = await send(url, path, { headers, body: JSON.stringify(body) });
      counts.requests++;
      if (res.status === 200) {
        counts.acknowledged++;
        return res;
      }
      counts.refused++;
      assert.equal(res.status, 503, `unexpected ${res.status} ${JSON.stringify(res.json)}`);
      return undefined;
    }, 30_000, `200 from ${path}`, 100);
  }

  it('updates acknowledged after the reset replace those stored before it; dead letters before and after do not collide', async function () {
    // Its poison writes are documents over 16 MiB: the API must take bodies that large.
    const c = (cluster = await new Cluster({ label: 'redis-reset', env: { BODY_LIMIT_BYTES: OVERSIZE_BODY_LIMIT_BYTES } }).start());
    const [api] = await Promise.all([c.startApi(), c.startWorker()]);
    const responses = c.db().collection<Record<string, any> & { _id: string }>(COLLECTIONS.responses);
    const storedValues = (id: string, want: unknown) =>
      until(async () => {
        const doc = await responses.findOne({ _id: id });
        return doc !== null && JSON.stringify(doc['values']) === JSON.stringify(want) ? doc : undefined;
      }, 30_000, `response ${id} to hold ${JSON.stringify(want)}`, 100);

    // Before: three records, each with updates by two annotators, all stored. Many jobs, so the
    // job-id counter is well above where an empty Redis starts.
    const ids: { record: string; response: string; user: string }[] = [];
    for (let r = 0; r < 3; r++) {
      const rec = await postOk(api.url, '/feedback-record', { record: { feedback_dataset_id: 'reset', field_to_value: { q: `r${r}` } }, response: { values: { v: 'first' } } });
      const recordId = (rec.json as { feedback_record_id: string }).feedback_record_id;
      for (const user of ['ann-a', 'ann-b']) {
        let responseId = '';
        for (let n = 1; n <= 4; n++) {
          const res = await postOk(api.url, '/feedback-response', { feedback_record_id: recordId, response: { status: 'draft', values: { v: `before-${n}` }, user_id: user } });
          responseId = (res.json as { feedback_response_id: string }).feedback_response_id;
        }
        ids.push({ record: recordId, response: responseId, user });
      }
    }
    for (const { response } of ids) await storedValues(response, { v: 'before-4' });
    // A write the store refuses for good (larger than its document limit): a dead letter.
    await postOk(api.url, '/feedback-response', { feedback_record_id: ids[0]!.record, response: { status: 'draft', values: { v: OVERSIZE_TEXT }, user_id: 'poison-1' } });
    await until(async () => ((await c.deadLetters()).length === 1 ? true : undefined), 30_000, 'the first dead letter');
    const jobsBefore = Number(await c.redisClient().get(c.key('id')));

    await c.redis.wipe();
    const resetAt = Date.now();

    // After: one update per response, acknowledged by the same processes (no restart).
    for (const { record, user } of ids) {
      await postOk(api.url, '/feedback-response', { feedback_record_id: record, response: { status: 'submitted', values: { v: 'after' }, user_id: user } });
    }
    await postOk(api.url, '/feedback-response', { feedback_record_id: ids[1]!.record, response: { status: 'draft', values: { v: OVERSIZE_TEXT }, user_id: 'poison-2' } });
    const jobsAfter = Number(await c.redisClient().get(c.key('id')));
    for (const { response } of ids) {
      const doc = await storedValues(response, { v: 'after' });
      assert.equal(doc['status'], 'submitted');
    }
    const letters = await until(async () => {
      const all = await c.deadLetters();
      return all.length >= 2 ? all : undefined;
    }, 30_000, 'the second dead letter');
    recordScenario(this.test!.fullTitle(), {
      fault: 'Redis replaced by an empty server',
      ...counts,
      stored: ids.length,
      duplicated: 0,
      lost: 0,
      dead_lettered: letters.length,
      unanswered: 0,
      unanswered_stored: 0,
      answers_5xx: counts.refused,
      job_id_counter_before_reset: jobsBefore,
      job_id_counter_after: jobsAfter,
      responses_updated_after_reset: ids.length,
      dead_letters: letters.length,
      seconds_to_recover: Math.round((Date.now() - resetAt) / 100) / 10,
    });
    // The job-id counter did go back: without an order of their own, these updates were stale.
    assert.ok(jobsAfter < jobsBefore, `job ids did not go back (${jobsBefore} → ${jobsAfter}): the scenario did not reset Redis`);
    assert.equal(letters.length, 2, `dead letters collided: ${JSON.stringify(letters.map((l) => l['_id']))}`);
    assert.deepEqual(letters.map((l) => l['reason']).sort(), ['store_rejected', 'store_rejected']);
  });
});
