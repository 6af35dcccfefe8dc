import { expect } from 'chai';
import { Job, type Queue } from 'bullmq';
import { JOB_PAYLOAD_VERSION, JOB_PAYLOAD_VERSION_DEFLATE } from '../../shared/job-payload.js';
import { WRITE_JOB_NAME } from '../../shared/queue.js';
import { COLLECTIONS, createMongo } from '../../shared/mongo.js';
import { OTHER_KEY, testConfig, TEST_KEY } from '../helpers/env.js';
import { startWorker } from '../../worker/runtime.js';
import { OVERSIZE_BODY_LIMIT_BYTES, OVERSIZE_TEXT } from '../helpers/oversize.js';
import { deadLetters, eventually, recordBody, records, responses, silentLogger, startStack, type Stack } from '../helpers/stack.js';

async function stored<T>(find: () => Promise<T | null>, what: string): Promise<T> {
  return eventually(async () => (await find()) ?? undefined, 15_000, what);
}

describe('worker semantics (ids, updates, order, idempotency, dead letters)', () => {
  let stack: Stack;
  beforeEach(async () => {
    stack = await startStack(testConfig({ WORKER_CONCURRENCY: '8' }), { worker: false });
  });
  afterEach(async () => {
    await stack?.close();
  });

  it('accepts a response for a record that is still queued, and stores both once the worker runs', async () => {
    const rec = await stack.post('/feedback-record', recordBody());
    expect(rec.status).to.equal(200);
    const ann = await stack.post('/feedback-response', { feedback_record_id: rec.body.feedback_record_id, response: { status: 'draft', values: { helpful: 3 }, user_id: 'annotator-4' } });
    expect(ann.status).to.equal(200);
    expect(ann.body).to.deep.equal({ feedback_record_id: rec.body.feedback_record_id, feedback_response_id: ann.body.feedback_response_id, status: 'draft' });
    expect(await records(stack.db).countDocuments({})).to.equal(0);
    await stack.startWorker();
    const doc = await stored(() => responses(stack.db).findOne({ _id: ann.body.feedback_response_id }), 'annotation');
    expect(doc).to.include({ feedback_record_id: rec.body.feedback_record_id, feedback_dataset_id: 'ds_test', user_id: 'annotator-4', status: 'draft' });
    expect(await records(stack.db).countDocuments({ _id: rec.body.feedback_record_id })).to.equal(1);
  });

  it('a second response by the same annotator updates in place: same id, created_at kept, updated_at moved', async () => {
    await stack.startWorker();
    const rec = await stack.post('/feedback-record', recordBody());
    const id = rec.body.feedback_record_id as string;
    const first = await stack.post('/feedback-response', { feedback_record_id: id, response: { status: 'draft', values: { helpful: 2 }, user_id: 'ann-1' } });
    const firstDoc = await stored(() => responses(stack.db).findOne({ _id: first.body.feedback_response_id, status: 'draft' }), 'draft');
    // updated_at is the API's acceptance time, in ms: let the clock pass the first one, so that the
    // update is accepted later on any machine.
    const firstAcceptedAt = (firstDoc['updated_at'] as Date).getTime();
    await eventually(async () => (Date.now() > firstAcceptedAt ? true : undefined), 1_000, 'the clock to pass the first acceptance');
    const second = await stack.post('/feedback-response', { feedback_record_id: id, response: { status: 'submitted', values: { helpful: 5, note: 'better' }, user_id: 'ann-1' } });
    expect(second.body.feedback_response_id).to.equal(first.body.feedback_response_id);
    const doc = await stored(() => responses(stack.db).findOne({ _id: first.body.feedback_response_id, status: 'submitted' }), 'update');
    expect(doc['values']).to.deep.equal({ helpful: 5, note: 'better' });
    expect(doc['created_at']).to.deep.equal(firstDoc['created_at']);
    expect((doc['updated_at'] as Date).getTime()).to.be.greaterThan((firstDoc['updated_at'] as Date).getTime());
    expect(await responses(stack.db).countDocuments({ feedback_record_id: id, user_id: 'ann-1' })).to.equal(1);
  });

  it('two annotators give two responses; the default annotator is the API key name', async () => {
    await stack.startWorker();
    const rec = await stack.post('/feedback-record', recordBody({ response: { user_id: 'end-user-77' } }));
    const id = rec.body.feedback_record_id as string;
    const a = await stack.post('/feedback-response', { feedback_record_id: id, response: { status: 'submitted', values: { v: 1 } } });
    const b = await stack.post('/feedback-response', { feedback_record_id: id, response: { status: 'discarded', values: {} } }, { Authorization: `Bearer ${OTHER_KEY.secret}` });
    expect(a.body.feedback_response_id).to.not.equal(b.body.feedback_response_id);
    await eventually(async () => ((await responses(stack.db).countDocuments({ feedback_record_id: id })) === 3 ? true : undefined), 15_000, 'three responses');
    const users = (await responses(stack.db).find({ feedback_record_id: id }).toArray()).map((d) => d['user_id']).sort();
    expect(users).to.deep.equal(['end-user-77', OTHER_KEY.name, TEST_KEY.name].sort());
  });

  it('updates of one (record, annotator) processed newest first leave the last accepted one stored', async () => {
    await stack.startWorker();
    const rec = await stack.post('/feedback-record', recordBody());
    const id = rec.body.feedback_record_id as string;
    await stored(() => records(stack.db).findOne({ _id: id }), 'record');
    await stack.stopWorker();
    // Sent one after another, each its own job; then the queue is turned around, so the worker
    // (one job at a time) meets every update after a later one: only the order guard keeps the
    // last accepted one (a redelivery or a second worker can do the same).
    let responseId = '';
    for (let i = 1; i <= 30; i++) {
      // Arrays of objects under Object.prototype names ride along: reads of stored versions once
      // turned them into raw BSON Buffers.
      const res = await stack.post('/feedback-response', { feedback_record_id: id, response: { status: i === 30 ? 'submitted' : 'draft', values: { n: i, toString: [{ n: i }], valueOf: [{ at: [i] }] } } });
      expect(res.status).to.equal(200);
      responseId = res.body.feedback_response_id as string;
    }
    const wait = `bull:${stack.config.queueName}:wait`;
    const jobs = await stack.api.redis.lrange(wait, 0, -1);
    expect(jobs).to.have.length(30);
    await stack.api.redis.multi().del(wait).rpush(wait, ...[...jobs].reverse()).exec();
    stack.worker = await startWorker({ ...stack.config, workerConcurrency: 1 }, silentLogger);
    await eventually(async () => ((await stack.api.queue.getJobCountByTypes('waiting', 'active', 'delayed')) === 0 ? true : undefined), 20_000, 'drain');
    const doc = await stored(() => responses(stack.db).findOne({ _id: responseId }), 'response');
    expect(doc['values']).to.deep.equal({ n: 30, toString: [{ n: 30 }], valueOf: [{ at: [30] }] });
    expect(doc['status']).to.equal('submitted');
    // The record's first response has the same annotator (the key's name): one document, updated.
    expect(await responses(stack.db).countDocuments({ feedback_record_id: id })).to.equal(1);
  });

  it('keys named like Object.prototype members (toString, valueOf…) holding arrays of objects are stored and read back as sent', async () => {
    await stack.startWorker();
    const odd = { toString: [{ a: 1 }], valueOf: [{ b: [{ c: 2 }] }], hasOwnProperty: [{}], constructorish: { toLocaleString: [{ d: 'x' }] } };
    const rec = await stack.post('/feedback-record', recordBody({ record: { field_to_value: odd, metadata: odd }, response: { values: odd } }));
    expect(rec.status).to.equal(200);
    const recordDoc = await stored(() => records(stack.db).findOne({ _id: rec.body.feedback_record_id }), 'record');
    expect(recordDoc['field_to_value']).to.deep.equal(odd);
    expect(recordDoc['metadata']).to.deep.equal(odd);
    const responseDoc = await stored(() => responses(stack.db).findOne({ _id: rec.body.feedback_response_id }), 'response');
    expect(responseDoc['values']).to.deep.equal(odd);
    // The same documents through the service's own client factory (the worker's reads).
    const mongo = createMongo(stack.config);
    try {
      const again = await mongo.db.collection(COLLECTIONS.records).findOne({ _id: rec.body.feedback_record_id as never });
      expect(again?.['field_to_value']).to.deep.equal(odd);
    } finally {
      await mongo.close();
    }
  });

  it('queued jobs are deflated by default and plain JSON with QUEUE_COMPRESSION=none; the worker stores both', async () => {
    const plain = await startStack(testConfig({ QUEUE_COMPRESSION: 'none', QUEUE_NAME: stack.config.queueName }), { worker: false });
    try {
      // As a client does: a 503 is retried after its Retry-After. The first enqueue of a process
      // that has just started took over ENQUEUE_TIMEOUT_MS (1 s) once on a loaded CI machine; such
      // a 503 may have reached Redis after all, so a write may sit in two jobs, of the same kind.
      const accepted = async (s: Stack, q: string) => {
        let res = await s.post('/feedback-record', recordBody({ record: { field_to_value: { q } } }));
        for (let n = 0; n < 3 && res.status === 503; n++) {
          await new Promise((r) => setTimeout(r, 1000));
          res = await s.post('/feedback-record', recordBody({ record: { field_to_value: { q } } }));
        }
        return res;
      };
      const a = await accepted(stack, 'deflated');
      const b = await accepted(plain, 'plain');
      expect([a.status, b.status], `answers: ${a.text} / ${b.text}`).to.deep.equal([200, 200]);
      const jobs = await stack.api.queue.getJobs(['waiting']);
      const versions = [...new Set(jobs.map((j) => (j.data as { v: number }).v))].sort();
      expect(versions).to.deep.equal([JOB_PAYLOAD_VERSION, JOB_PAYLOAD_VERSION_DEFLATE]);
      for (const job of jobs.filter((j) => j.data.v === JOB_PAYLOAD_VERSION_DEFLATE)) {
        const packed = job.data as { n: number; z: string };
        expect(packed.n).to.equal(1);
        expect(JSON.stringify(packed)).to.not.include('deflated'); // the body is not readable in Redis
      }
      await stack.startWorker();
      expect((await stored(() => records(stack.db).findOne({ _id: a.body.feedback_record_id }), 'deflated record'))['field_to_value']).to.deep.equal({ q: 'deflated' });
      expect((await stored(() => records(stack.db).findOne({ _id: b.body.feedback_record_id }), 'plain record'))['field_to_value']).to.deep.equal({ q: 'plain' });
    } finally {
      await plain.close();
    }
  });

  it('an Idempotency-Key replay returns the first answer and stores one record; another body with the key is 409', async () => {
    await stack.startWorker();
    const body = recordBody({ record: { external_id: 'idem-1' } });
    const first = await stack.post('/feedback-record', body, { 'Idempotency-Key': 'click-123' });
    const again = await stack.post('/feedback-record', body, { 'Idempotency-Key': 'click-123' });
    expect(first.status).to.equal(200);
    expect(again.status).to.equal(200);
    expect(again.body).to.deep.equal(first.body);
    const other = await stack.post('/feedback-record', recordBody({ record: { external_id: 'idem-2' } }), { 'Idempotency-Key': 'click-123' });
    expect(other.status).to.equal(409);
    expect(other.body.error.code).to.equal('idempotency_key_reused');
    // The same key from another API key is a different request.
    const otherKey = await stack.post('/feedback-record', body, { 'Idempotency-Key': 'click-123', Authorization: `Bearer ${OTHER_KEY.secret}` });
    expect(otherKey.status).to.equal(200);
    expect(otherKey.body.feedback_record_id).to.not.equal(first.body.feedback_record_id);
    await stored(() => records(stack.db).findOne({ _id: otherKey.body.feedback_record_id }), 'other key record');
    await stored(() => records(stack.db).findOne({ _id: first.body.feedback_record_id }), 'record');
    expect(await records(stack.db).countDocuments({ external_id: 'idem-1' })).to.equal(2);
    expect(await records(stack.db).countDocuments({ external_id: 'idem-2' })).to.equal(0);
  });

  it('a job run twice stores one document per write', async () => {
    await stack.startWorker();
    const rec = await stack.post('/feedback-record', recordBody({ record: { external_id: 'twice' } }));
    await stored(() => responses(stack.db).findOne({ _id: rec.body.feedback_response_id }), 'first run');
    const completed = await eventually(async () => (await stack.api.queue.getJobs(['completed']))[0], 10_000, 'completed job');
    await completed.retry('completed');
    await eventually(async () => {
      const job = await Job.fromId(stack.api.queue, completed.id!);
      return job !== undefined && (await job.isCompleted()) && job.attemptsStarted >= 1 && job.finishedOn !== completed.finishedOn ? true : undefined;
    }, 15_000, 'second run');
    expect(await records(stack.db).countDocuments({ external_id: 'twice' })).to.equal(1);
    expect(await responses(stack.db).countDocuments({ feedback_record_id: rec.body.feedback_record_id })).to.equal(1);
  });

  it('a malformed job is dead-lettered and failed at once, not retried', async () => {
    await stack.startWorker();
    const job = await stack.api.queue.add(WRITE_JOB_NAME, { v: 99, writes: 'nonsense' } as never);
    const letter = await stored(() => deadLetters(stack.db).findOne({ job_id: job.id! }), 'dead letter');
    expect(letter['reason']).to.equal('malformed_job');
    expect(letter['payload_json']).to.contain('nonsense');
    // The state first, then a snapshot: a snapshot read before the job moved to failed would
    // still show the attempt in progress.
    await eventually(async () => ((await stack.api.queue.getJobState(job.id!)) === 'failed' ? true : undefined), 10_000, 'failed job');
    const failed = await Job.fromId(stack.api.queue, job.id!);
    expect(failed?.attemptsMade).to.equal(1);
    expect(failed?.failedReason).to.be.a('string').and.not.equal('');
  });

  it('a job of another name than the queue contract\'s is dead-lettered as malformed_job with its name, not stored, not retried', async () => {
    await stack.startWorker();
    const body = recordBody({ record: { external_id: 'other-name' } });
    const valid = { kind: 'record', request_id: 'r-name', accepted_at: Date.now(), api_key: 'tester', record_id: 'rec_manual_name_0000000000000000000', response_id: 'rsp_manual_name', record: body.record, response: { status: 'submitted', values: { a: 1 }, user_id: 'u' } };
    // A well-formed payload under a name this worker does not know (another producer, a future release).
    const job = await (stack.api.queue as unknown as Queue).add('suggestions', { v: JOB_PAYLOAD_VERSION, writes: [valid] });
    const letter = await stored(() => deadLetters(stack.db).findOne({ job_id: job.id! }), 'dead letter');
    expect(letter['reason']).to.equal('malformed_job');
    expect(letter['error']).to.contain('"suggestions"');
    await eventually(async () => ((await stack.api.queue.getJobState(job.id!)) === 'failed' ? true : undefined), 10_000, 'failed job');
    expect((await Job.fromId(stack.api.queue, job.id!))?.attemptsMade).to.equal(1);
    expect(await records(stack.db).countDocuments({ _id: valid.record_id })).to.equal(0);
  });

  it('a write the store refuses is dead-lettered with its reason; the other writes of its job are stored', async () => {
    await stack.startWorker();
    const good = recordBody({ record: { external_id: 'good' } });
    const valid = { kind: 'record', request_id: 'r1', accepted_at: Date.now(), api_key: 'tester', record_id: 'rec_manual_good_000000000000000000', response_id: 'rsp_manual_good', record: good.record, response: { status: 'submitted', values: { a: 1 }, user_id: 'u' } };
    // Larger than the store's document limit (MongoDB's and its stand-in's): refused for good.
    const poison = { ...valid, record_id: 'rec_manual_poison_0000000000000000', response_id: 'rsp_manual_poison', record: { ...good.record, external_id: 'poison', field_to_value: { text: OVERSIZE_TEXT } } };
    const malformed = { kind: 'record', record_id: 42 };
    const job = await stack.api.queue.add(WRITE_JOB_NAME, { v: JOB_PAYLOAD_VERSION, writes: [valid, poison, malformed] } as never);
    await stored(() => records(stack.db).findOne({ _id: valid.record_id }), 'good record');
    const malformedLetter = await stored(() => deadLetters(stack.db).findOne({ job_id: job.id!, write_index: 2 }), 'malformed letter');
    expect(malformedLetter['reason']).to.equal('malformed_write');
    const l = await stored(() => deadLetters(stack.db).findOne({ job_id: job.id!, write_index: 1 }), 'poison letter');
    expect(l['reason']).to.equal('store_rejected');
    expect(l['record_id']).to.equal(poison.record_id);
    // The letter holds the head of the payload: all of it would be refused as well.
    expect(l['error']).to.include('payload_json cut');
    expect(await records(stack.db).countDocuments({ _id: poison.record_id })).to.equal(0);
    expect(await responses(stack.db).countDocuments({ _id: 'rsp_manual_good' })).to.equal(1);
  });

  it('an update the store refuses for good is dead-lettered and leaves the stored response as it was, never null in between', async () => {
    await stack.close();
    // A body over the store's 16 MiB document limit must pass the API to reach the store.
    stack = await startStack(testConfig({ WORKER_CONCURRENCY: '8', BODY_LIMIT_BYTES: OVERSIZE_BODY_LIMIT_BYTES }), { worker: false });
    await stack.startWorker();
    const ids: { record: string; response: string }[] = [];
    for (let n = 0; n < 5; n++) {
      const rec = await stack.post('/feedback-record', recordBody());
      const res = await stack.post('/feedback-response', { feedback_record_id: rec.body.feedback_record_id, response: { status: 'draft', values: { kept: n }, user_id: 'ann-refused' } });
      ids.push({ record: rec.body.feedback_record_id as string, response: res.body.feedback_response_id as string });
    }
    for (const { response } of ids) await stored(() => responses(stack.db).findOne({ _id: response }), 'the first version');
    // Readers poll the stored values while the refused updates are tried.
    let reading = true;
    const seen: unknown[] = [];
    const reader = (async () => {
      while (reading) {
        for (const d of await responses(stack.db).find({ _id: { $in: ids.map((i) => i.response) } }).toArray()) seen.push(d['values']);
        await new Promise((r) => setTimeout(r, 10));
      }
    })();
    for (const { record } of ids) {
      const res = await stack.post('/feedback-response', { feedback_record_id: record, response: { status: 'submitted', values: { text: OVERSIZE_TEXT }, user_id: 'ann-refused' } });
      expect(res.status).to.equal(200);
    }
    await eventually(async () => ((await deadLetters(stack.db).countDocuments({ reason: 'store_rejected' })) === ids.length ? true : undefined), 30_000, 'a dead letter per refused update');
    reading = false;
    await reader;
    for (const [n, { response }] of ids.entries()) {
      const doc = await responses(stack.db).findOne({ _id: response });
      expect(doc?.['values'], response).to.deep.equal({ kept: n });
      expect(doc?.['status']).to.equal('draft');
    }
    expect(seen.length).to.be.greaterThan(0);
    expect(seen.filter((v) => v === null || v === undefined), 'values a reader saw as null').to.deep.equal([]);
  });
});
