import { expect } from 'chai';
import { startFerretDb, type ManagedServer } from '../../devkit/servers.js';
import { createFeedbackClient } from '../../client/index.js';
import { COLLECTIONS } from '../../shared/mongo.js';
import { TEST_KEY, testConfig } from '../helpers/env.js';
import { sharedServices } from '../helpers/root-hooks.js';
import { deadLetters, eventually, recordBody, records, responses, startStack, type HttpResult, type Stack } from '../helpers/stack.js';

/*
 * POST /admin/erasures ordered with the queue (docs/erasure.md): what the user wrote before the
 * 202 is gone when the erasure says done, queued writes and retries included; what they wrote
 * after it is stored. Real Redis, real store, the worker in-process (one process: ERASURE_SETTLE_MS 0).
 */

const ADMIN = { ADMIN_API_KEY_NAMES: TEST_KEY.name, ERASURE_SETTLE_MS: '0' };

function erasures(stack: Stack) {
  return stack.db.collection<{ _id: string; seq: number; status: string; user_hash: string; requested_at: Date }>(COLLECTIONS.erasures);
}

async function inBatches(count: number, send: (i: number) => Promise<HttpResult>, width = 20): Promise<HttpResult[]> {
  const out: HttpResult[] = [];
  for (let start = 0; start < count; start += width) {
    out.push(...(await Promise.all(Array.from({ length: Math.min(width, count - start) }, (_, k) => send(start + k)))));
  }
  for (const r of out) expect(r.status, r.text).to.equal(200);
  return out;
}

async function erase(stack: Stack, body: Record<string, unknown>): Promise<string> {
  const res = await stack.post('/admin/erasures', body);
  expect(res.status, res.text).to.equal(202);
  expect(res.body.status).to.equal('pending');
  return res.body.erasure_id as string;
}

async function done(stack: Stack, id: string, timeoutMs = 30_000): Promise<HttpResult['body']> {
  return eventually(async () => {
    const res = await stack.request(`/admin/erasures/${id}`, { headers: { Authorization: `Bearer ${TEST_KEY.secret}` } });
    expect(res.status, res.text).to.equal(200);
    return res.body.status === 'done' ? res.body : undefined;
  }, timeoutMs, `erasure ${id} done`);
}

/** Every job of the queue finished (none waiting, active or delayed). */
async function drained(stack: Stack): Promise<void> {
  await eventually(async () => {
    const counts = await stack.api.queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized');
    return Object.values(counts).every((n) => n === 0) ? true : undefined;
  }, 30_000, 'the queue to drain');
}

describe('POST /admin/erasures (ordered erasure)', () => {
  let stack: Stack;
  afterEach(async () => {
    await stack?.close();
  });

  it('a user with 200 writes, 50 still queued behind a stopped worker: none stored after done; 10 writes after the 202 all stored', async () => {
    stack = await startStack(testConfig({ ...ADMIN, WORKER_CONCURRENCY: '8' }));
    // Someone else's records, which the user answers (and which must survive the erasure).
    const others = await inBatches(20, () => stack.post('/feedback-record', recordBody({ response: { user_id: 'bob' } })));
    const otherIds = others.map((r) => r.body.feedback_record_id as string);
    // 200 writes of alice: 100 records she created (a chatbot end user) and 100 responses (5 versions on each of bob's 20).
    const send = (i: number) =>
      i % 2 === 0
        ? stack.post('/feedback-record', recordBody({ record: { field_to_value: { prompt: `alice's words ${i}` } }, response: { user_id: 'alice' } }))
        : stack.post('/feedback-response', { feedback_record_id: otherIds[(i >> 1) % 20]!, response: { status: 'submitted', values: { v: i }, user_id: 'alice' } });
    const before = await inBatches(150, send);
    await eventually(async () => ((await responses(stack.db).countDocuments({ user_id: 'alice' })) === 75 + 20 ? true : undefined), 30_000, "alice's first 150 writes stored");
    await stack.stopWorker();
    before.push(...(await inBatches(50, (i) => send(150 + i))));
    expect(await stack.api.queue.getWaitingCount()).to.be.greaterThan(0);

    const id = await erase(stack, { user_id: 'alice' });
    // Accepted after the 202: 5 new records and an update on 5 of bob's records.
    const after = await inBatches(10, (i) =>
      i < 5
        ? stack.post('/feedback-record', recordBody({ record: { field_to_value: { prompt: `later ${i}` } }, response: { user_id: 'alice' } }))
        : stack.post('/feedback-response', { feedback_record_id: otherIds[i]!, response: { status: 'draft', values: { later: i }, user_id: 'alice' } }),
    );
    await stack.startWorker();
    const view = await done(stack, id);
    await drained(stack);

    const beforeRecords = before.filter((r, i) => i % 2 === 0).map((r) => r.body.feedback_record_id as string);
    expect(await records(stack.db).countDocuments({ _id: { $in: beforeRecords } }), 'records alice created before the erasure').to.equal(0);
    const stored = await responses(stack.db).find({ user_id: 'alice' }).toArray();
    const { seq } = (await erasures(stack).findOne({ _id: id }))!;
    expect(stored.filter((d) => d['seq'] < seq), 'alice responses accepted before the erasure').to.deep.equal([]);
    // Every write after the 202 is stored, as sent.
    expect(stored.map((d) => d._id).sort()).to.deep.equal(after.map((r) => r.body.feedback_response_id as string).sort());
    for (const d of stored.filter((x) => x['status'] === 'draft')) expect(d['values']).to.have.property('later');
    expect(await records(stack.db).countDocuments({ _id: { $in: after.slice(0, 5).map((r) => r.body.feedback_record_id as string) } })).to.equal(5);
    // Bob's records and responses are untouched.
    expect(await records(stack.db).countDocuments({ _id: { $in: otherIds } })).to.equal(20);
    expect(await responses(stack.db).countDocuments({ user_id: 'bob' })).to.equal(20);
    // The 75 stored before the stop, plus those of the 25 queued ones the worker stored before it
    // ran the erasure (then removed); queued ones it reached after are dropped, never stored, never counted.
    expect(view.removed.records).to.be.within(75, 100);
    expect(view.finished_at).to.be.a('string');
    // The tombstone keeps a hash, never the user id.
    expect(JSON.stringify(await erasures(stack).findOne({ _id: id }))).to.not.include('alice');
  });

  it('a version accepted after the erasure and stored before its sweep keeps nothing of the earlier ones: not in history, not their created_at', async () => {
    stack = await startStack(testConfig({ ...ADMIN }));
    const record = await stack.post('/feedback-record', recordBody({ response: { user_id: 'bob' } }));
    const recordId = record.body.feedback_record_id as string;
    const answer = (v: number) => stack.post('/feedback-response', { feedback_record_id: recordId, response: { status: 'submitted', values: { v }, user_id: 'carol' } });
    const first = await answer(1);
    await eventually(async () => ((await responses(stack.db).findOne({ _id: first.body.feedback_response_id }))?.['values']?.['v'] === 1 ? true : undefined), 20_000, 'the first version stored');
    // The second version, the erasure and a third version queued together: one store round meets them.
    await stack.stopWorker();
    await answer(2);
    const id = await erase(stack, { user_id: 'carol', records: 'keep' });
    await answer(3);
    await stack.startWorker();
    await done(stack, id);
    await drained(stack);
    const { seq } = (await erasures(stack).findOne({ _id: id }))!;
    const doc = await responses(stack.db).findOne({ _id: first.body.feedback_response_id });
    expect(doc?.['values'], 'the version accepted after the erasure is stored').to.deep.equal({ v: 3 });
    expect(doc!['seq']).to.be.greaterThan(seq);
    const history = (doc!['history'] ?? []) as { seq: number }[];
    expect(history.filter((h) => h.seq < seq), 'versions before the erasure in history').to.deep.equal([]);
    const erasedAt = new Date((await erasures(stack).findOne({ _id: id }))!.requested_at);
    expect(new Date(doc!['created_at'] as Date).getTime(), "created_at is not the erased first version's").to.be.at.least(erasedAt.getTime());
  });

  it('a response to a record the erasure removed, sent after it: not stored without its record (dead-lettered record_not_stored), though the worker had the record in memory', async () => {
    stack = await startStack(testConfig({ ...ADMIN, JOB_ATTEMPTS: '1' }));
    const created = await stack.post('/feedback-record', recordBody({ response: { user_id: 'dave' } }));
    const recordId = created.body.feedback_record_id as string;
    // Another annotator's response, stored: the worker has met the record (it inserted it).
    await stack.post('/feedback-response', { feedback_record_id: recordId, response: { status: 'submitted', values: { v: 1 }, user_id: 'erin' } });
    await eventually(async () => ((await responses(stack.db).countDocuments({ feedback_record_id: recordId })) === 2 ? true : undefined), 20_000, 'both responses stored');
    await done(stack, await erase(stack, { user_id: 'dave' }));
    expect(await records(stack.db).countDocuments({ _id: recordId }), 'the record dave created is erased').to.equal(0);
    const late = await stack.post('/feedback-response', { feedback_record_id: recordId, response: { status: 'submitted', values: { v: 2 }, user_id: 'fay' } });
    expect(late.status, late.text).to.equal(200);
    const letter = await eventually(async () => (await deadLetters(stack.db).findOne({ record_id: recordId })) ?? undefined, 20_000, 'the late response dead-lettered');
    expect(letter['reason']).to.equal('record_not_stored');
    expect(await responses(stack.db).countDocuments({ feedback_record_id: recordId }), 'no response stored without its record').to.equal(0);
  });

  it('records: keep leaves the records the user created (without their response); created_and_orphaned also removes records left unanswered', async () => {
    stack = await startStack(testConfig(ADMIN));
    const carol = await stack.post('/feedback-record', recordBody({ response: { user_id: 'carol' } }));
    const bobs = await stack.post('/feedback-record', recordBody({ response: { user_id: 'bob' } }));
    const onlyCarol = await stack.post('/feedback-record', recordBody({ response: { user_id: 'dave', status: 'discarded', values: {} } }));
    await stack.post('/feedback-response', { feedback_record_id: bobs.body.feedback_record_id, response: { status: 'submitted', values: { v: 1 }, user_id: 'carol' } });
    await eventually(async () => ((await responses(stack.db).countDocuments({})) === 4 ? true : undefined), 15_000, 'four responses');
    const keep = await erase(stack, { user_id: 'carol', records: 'keep' });
    expect((await done(stack, keep)).removed).to.deep.include({ responses: 2, records: 0 });
    expect(await records(stack.db).countDocuments({ _id: carol.body.feedback_record_id })).to.equal(1);
    expect(await responses(stack.db).countDocuments({ user_id: 'carol' })).to.equal(0);

    // dave's only response goes; his record has no other: created_and_orphaned removes it too, but keeps bob's.
    // Both records hold a completion guard (a recount's claim, worker/completion.ts): the removed record's goes with it.
    const guards = stack.db.collection<{ _id: string; token: string }>(COLLECTIONS.completionGuards);
    await guards.insertMany([{ _id: onlyCarol.body.feedback_record_id, token: 't1' }, { _id: bobs.body.feedback_record_id, token: 't2' }]);
    const orphaned = await erase(stack, { user_id: 'dave', records: 'created_and_orphaned' });
    await done(stack, orphaned);
    expect(await records(stack.db).countDocuments({ _id: onlyCarol.body.feedback_record_id })).to.equal(0);
    expect(await records(stack.db).countDocuments({ _id: bobs.body.feedback_record_id })).to.equal(1);
    expect((await guards.find({}).toArray()).map((g) => g._id)).to.deep.equal([bobs.body.feedback_record_id]);

    // An erasure limited to other datasets leaves bob alone.
    const scoped = await erase(stack, { user_id: 'bob', datasets: ['ds_other'] });
    expect((await done(stack, scoped)).datasets).to.deep.equal(['ds_other']);
    expect(await responses(stack.db).countDocuments({ user_id: 'bob' })).to.equal(1);
  });

  it('two erasures of one user racing with her writes: both done, nothing accepted before the later one stored, everything after both stored', async () => {
    stack = await startStack(testConfig({ ...ADMIN, WORKER_CONCURRENCY: '8' }), { worker: false });
    const target = await stack.post('/feedback-record', recordBody({ response: { user_id: 'bob' } }));
    const recordId = target.body.feedback_record_id as string;
    const write = (i: number) =>
      i % 3 === 0
        ? stack.post('/feedback-record', recordBody({ record: { field_to_value: { prompt: `e ${i}` } }, response: { user_id: 'erin' } }))
        : stack.post('/feedback-response', { feedback_record_id: recordId, response: { status: 'submitted', values: { v: i }, user_id: 'erin' } });
    await inBatches(30, write);
    // The two erasures are sent among 40 more writes, all at once.
    const racing = await Promise.all([
      ...Array.from({ length: 20 }, (_, i) => write(100 + i)),
      stack.post('/admin/erasures', { user_id: 'erin' }),
      ...Array.from({ length: 20 }, (_, i) => write(200 + i)),
      stack.post('/admin/erasures', { user_id: 'erin', records: 'keep' }),
    ]);
    const ids = racing.filter((r) => r.status === 202).map((r) => r.body.erasure_id as string);
    expect(ids).to.have.length(2);
    const after = await inBatches(6, (i) => write(300 + i));
    await stack.startWorker();
    await Promise.all(ids.map((id) => done(stack, id)));
    await drained(stack);

    const docs = await erasures(stack).find({ _id: { $in: ids } }).toArray();
    const last = Math.max(...docs.map((e) => e.seq));
    // The first erasure sent erases created records too, the second keeps them: records go up to the first's order.
    const created = docs.find((e) => e._id === ids[0])!.seq;
    const stored = await responses(stack.db).find({ user_id: 'erin' }).toArray();
    expect(stored.filter((d) => d['seq'] < last), 'erin responses accepted before the later erasure').to.deep.equal([]);
    expect(await records(stack.db).countDocuments({ creator_user_id: 'erin', seq: { $lt: created } })).to.equal(0);
    // The 2 records and the latest response version written after both 202s are stored.
    const afterRecords = after.filter((_, i) => (300 + i) % 3 === 0).map((r) => r.body.feedback_record_id as string);
    expect(await records(stack.db).countDocuments({ _id: { $in: afterRecords } })).to.equal(afterRecords.length);
    const update = await responses(stack.db).findOne({ feedback_record_id: recordId, user_id: 'erin' });
    expect(update?.['values']).to.deep.equal({ v: 305 });
    expect(await records(stack.db).countDocuments({ _id: recordId }), "bob's record").to.equal(1);
  });

  describe('during a MongoDB outage', () => {
    let store: ManagedServer;
    before(async () => {
      store = await startFerretDb();
    });
    after(async () => {
      await store?.destroy();
    });

    it('is accepted while the store is down and completes after it; writes after its 202 are stored', async () => {
      stack = await startStack(testConfig({ ...ADMIN, MONGODB_TIMEOUT_MS: '1500', STORE_RETRY_MAX_DELAY_MS: '1000' }, { redisUrl: sharedServices().redisUrl, mongoUrl: store.url }));
      const before = await inBatches(20, (i) => stack.post('/feedback-record', recordBody({ record: { field_to_value: { prompt: `f ${i}` } }, response: { user_id: 'frank' } })));
      await eventually(async () => ((await responses(stack.db).countDocuments({ user_id: 'frank' })) === 20 ? true : undefined), 15_000, "frank's writes stored");
      await store.stop();
      // Queued during the outage: more of frank's writes, the erasure, then writes after its 202.
      before.push(...(await inBatches(5, (i) => stack.post('/feedback-record', recordBody({ record: { field_to_value: { prompt: `g ${i}` } }, response: { user_id: 'frank' } })))));
      const id = await erase(stack, { user_id: 'frank' });
      const after = await inBatches(5, (i) => stack.post('/feedback-record', recordBody({ record: { field_to_value: { prompt: `h ${i}` } }, response: { user_id: 'frank' } })));
      await eventually(async () => ((await stack.worker!.metrics.storeRetries.get()).values[0]?.value ?? 0) > 0 ? true : undefined, 15_000, 'the worker to notice the outage');
      await store.start();

      await done(stack, id, 60_000);
      await drained(stack);
      const beforeIds = before.map((r) => r.body.feedback_record_id as string);
      expect(await records(stack.db).countDocuments({ _id: { $in: beforeIds } })).to.equal(0);
      expect(await responses(stack.db).countDocuments({ feedback_record_id: { $in: beforeIds } })).to.equal(0);
      const afterIds = after.map((r) => r.body.feedback_record_id as string);
      expect(await records(stack.db).countDocuments({ _id: { $in: afterIds } })).to.equal(5);
      expect(await responses(stack.db).countDocuments({ user_id: 'frank' })).to.equal(5);
    });
  });

  it("removes the user's idempotency entries and dead letters, not other users'", async () => {
    stack = await startStack(testConfig(ADMIN));
    const gina = await stack.post('/feedback-record', recordBody({ response: { user_id: 'gina' } }), { 'Idempotency-Key': 'gina-1' });
    const hal = await stack.post('/feedback-record', recordBody({ response: { user_id: 'hal' } }), { 'Idempotency-Key': 'hal-1' });
    expect([gina.status, hal.status]).to.deep.equal([200, 200]);
    await eventually(async () => ((await records(stack.db).countDocuments({})) === 2 ? true : undefined), 15_000, 'two records');
    // Letters as the worker writes them: the write as JSON text (a refused write of gina's, one of hal's).
    const letter = (id: string, user: string) => ({
      _id: id, reason: 'store_rejected', error: 'test', queue: stack.config.queueName, job_id: '1', write_index: 0, request_id: 'r', record_id: 'rec_x', seq: 1,
      payload_json: JSON.stringify({ kind: 'response', record_id: 'rec_x', response: { status: 'submitted', values: { v: 1 }, user_id: user } }), failed_at: new Date(),
    });
    // And one whose payload was cut short before its user_id (a write over the letter's 1 MiB of
    // payload): the letter's own user_id names her.
    const cut = { ...letter('dl-gina-cut', 'gina'), _id: 'dl-gina-cut', seq: 2, user_id: 'gina', payload_json: '{"kind":"record","record":{"field_to_value":{"prompt":"gina\'s words' };
    await stack.db.collection(COLLECTIONS.deadLetters).insertMany([letter('dl-gina', 'gina'), letter('dl-hal', 'hal'), cut] as never[]);
    const view = await done(stack, await erase(stack, { user_id: 'gina' }));
    expect(view.removed).to.deep.equal({ responses: 1, records: 1, dead_letters: 2, idempotency_keys: 1 });
    expect((await stack.db.collection(COLLECTIONS.deadLetters).find({}).toArray()).map((d) => d._id)).to.deep.equal(['dl-hal']);
    // hal's key still replays; gina's was removed, so the same key runs again as a new write (after the erasure: stored).
    const halAgain = await stack.post('/feedback-record', recordBody({ response: { user_id: 'hal' } }), { 'Idempotency-Key': 'hal-1' });
    expect(halAgain.headers.get('idempotent-replayed')).to.equal('true');
    const ginaAgain = await stack.post('/feedback-record', recordBody({ response: { user_id: 'gina' } }), { 'Idempotency-Key': 'gina-1' });
    expect(ginaAgain.headers.get('idempotent-replayed')).to.not.equal('true');

    // The typed client: erase, then poll until done.
    const client = createFeedbackClient({ baseUrl: stack.baseUrl, apiKey: TEST_KEY.secret });
    const accepted = await client.erase({ user_id: 'hal', records: 'keep' }, { idempotencyKey: 'erase-hal' });
    expect(accepted.status).to.equal('pending');
    const finished = await eventually(async () => {
      const v = await client.getErasure(accepted.erasure_id);
      return v.status === 'done' ? v : undefined;
    }, 30_000, 'the client erasure');
    expect(finished).to.deep.include({ erasure_id: accepted.erasure_id, records: 'keep', datasets: null });
    expect(finished.removed.responses).to.equal(1);
  });

  it('admin scope only; 404 for an id never issued; 400 for a bad body', async () => {
    stack = await startStack(testConfig({ ERASURE_SETTLE_MS: '0' }), { worker: false });
    const refused = await stack.post('/admin/erasures', { user_id: 'x' });
    expect(refused.status).to.equal(403);
    expect(refused.body.error.code).to.equal('forbidden');
    await stack.close();
    stack = await startStack(testConfig(ADMIN), { worker: false });
    const bad = await stack.post('/admin/erasures', { user_id: '', records: 'all', extra: 1 });
    expect(bad.status).to.equal(400);
    expect(bad.body.error.details.map((d: { path: string }) => d.path).sort()).to.deep.equal(['extra', 'records', 'user_id']);
    const id = await erase(stack, { user_id: 'x' });
    const pending = await stack.request(`/admin/erasures/${id}`, { headers: { Authorization: `Bearer ${TEST_KEY.secret}` } });
    expect(pending.body).to.include({ erasure_id: id, status: 'pending' });
    const unknown = await stack.request(`/admin/erasures/era_${'A'.repeat(30)}`, { headers: { Authorization: `Bearer ${TEST_KEY.secret}` } });
    expect(unknown.status).to.equal(404);
  });
});
