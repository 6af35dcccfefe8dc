import { expect } from 'chai';
import { MongoClient, type Db } from 'mongodb';
import { createFeedbackClient, FeedbackApiError } from '../../client/index.js';
import { earlierVersions, type ResponseDoc } from '../../shared/documents.js';
import { COLLECTIONS, mongoClientOptions } from '../../shared/mongo.js';
import type { ResponseWrite } from '../../shared/writes.js';
import type { SequencedWrite } from '../../worker/documents.js';
import { ensureIndexes } from '../../worker/indexes.js';
import { createFeedbackWriter } from '../../worker/writer.js';
import { OTHER_KEY, testConfig, TEST_KEY, uniqueName } from '../helpers/env.js';
import { sharedServices } from '../helpers/root-hooks.js';
import { eventually, recordBody, silentLogger, startStack, type HttpResult, type Stack } from '../helpers/stack.js';
import { recordWrite } from '../helpers/writes.js';

const READER = { name: 'reader', secret: 'reader-secret-key-0004' } as const;
const ADMIN = { name: 'ops', secret: 'ops-secret-key-0003' } as const;
const API_KEYS = [TEST_KEY, OTHER_KEY, READER, ADMIN].map((k) => `${k.name}:${k.secret}`).join(',');
const DEFINITION = { fields: [{ name: 'prompt', type: 'text' }, { name: 'answer', type: 'text' }], questions: [{ name: 'helpful', type: 'number' }] };

describe('completion, progress and history through the API', () => {
  let stack: Stack;
  const get = (path: string, secret: string = READER.secret): Promise<HttpResult> => stack.request(path, { headers: { Authorization: `Bearer ${secret}` } });
  const put = (id: string, body: unknown) =>
    stack.request(`/datasets/${id}`, { method: 'PUT', headers: { Authorization: `Bearer ${ADMIN.secret}`, 'Content-Type': 'application/json' }, body: JSON.stringify(body) });

  before(async () => {
    stack = await startStack(testConfig({ API_KEYS, READ_API_KEY_NAMES: READER.name, ADMIN_API_KEY_NAMES: ADMIN.name, RESPONSE_HISTORY_MAX: '3', DATASETS_REFRESH_MS: '3600000' }), { worker: false });
    expect((await put('ds_progress', { ...DEFINITION, completion: { min_submitted: 2 } })).status).to.equal(201);
    expect((await put('ds_norule', DEFINITION)).status).to.equal(201);
    await stack.startWorker();
  });
  after(async () => {
    await stack?.close();
  });

  it('a rule PUT applies to the writes accepted after its 201, added, changed or removed (no reload period in between)', async () => {
    // The stack's processes reload definitions every DATASETS_REFRESH_MS (an hour here, below):
    // the PUT's own API process holds the new definition at once, and the worker reads the rule
    // with each store round.
    const statusOf = async (id: string) => (await eventually(async () => {
      const r = await get(`/feedback-record/${id}`);
      return r.status === 200 ? (r.body.status as string) : undefined;
    }, 15_000, `record ${id} stored`));
    const create = async () => {
      const created = await stack.post('/feedback-record', recordBody({ record: { feedback_dataset_id: 'ds_rule_now' }, response: { user_id: 'ann-a', values: { helpful: 1 } } }));
      expect(created.status, created.text).to.equal(200);
      return created.body.feedback_record_id as string;
    };
    expect((await put('ds_rule_now', { ...DEFINITION, completion: { min_submitted: 2 } })).status).to.equal(201);
    expect(await statusOf(await create()), 'rule added: one submitted of two').to.equal('pending');
    expect((await put('ds_rule_now', { ...DEFINITION, completion: { min_submitted: 1 } })).status).to.equal(200);
    expect(await statusOf(await create()), 'rule changed to one').to.equal('completed');
    expect((await put('ds_rule_now', DEFINITION)).status).to.equal(200);
    expect(await statusOf(await create()), 'rule removed').to.equal('submitted');
  });

  it('PUT /datasets/{id} refuses a bad completion rule with 400 and its path', async () => {
    for (const completion of [{ min_submitted: 0 }, { min_submitted: 1.5 }, { min_submitted: '2' }, { min_submitted: 2, extra: 1 }, {}, 2]) {
      const res = await put('ds_bad_rule', { ...DEFINITION, completion });
      expect(res.status, JSON.stringify(completion)).to.equal(400);
      expect(res.body.error.code).to.equal('validation_failed');
      expect(res.body.error.details[0].path, JSON.stringify(completion)).to.match(/^completion/);
    }
    const stored = await get('/datasets/ds_progress', ADMIN.secret);
    expect(stored.body.completion).to.deep.equal({ min_submitted: 2 });
  });

  it('records become completed at the second submitting annotator and pending again; GET /datasets/{id}/progress counts them, the responses and each annotator', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const created = await stack.post('/feedback-record', recordBody({ record: { feedback_dataset_id: 'ds_progress' }, response: { user_id: 'ann-a', values: { helpful: i } } }));
      expect(created.status, created.text).to.equal(200);
      ids.push(created.body.feedback_record_id);
    }
    const respond = async (id: string, status: string) => {
      const res = await stack.post('/feedback-response', { feedback_record_id: id, response: { status, values: { helpful: 1 }, user_id: 'ann-b' } });
      expect(res.status, res.text).to.equal(200);
    };
    await respond(ids[0]!, 'submitted');
    await respond(ids[1]!, 'draft');
    await respond(ids[2]!, 'submitted');
    await respond(ids[2]!, 'discarded');

    const expected = {
      feedback_dataset_id: 'ds_progress',
      completion: { min_submitted: 2 },
      records: { total: 3, pending: 2, completed: 1 },
      responses: { submitted: 4, draft: 1, discarded: 1 },
      annotators: [
        { user_id: 'ann-a', submitted: 3, draft: 0, discarded: 0 },
        { user_id: 'ann-b', submitted: 1, draft: 1, discarded: 1 },
      ],
    };
    // `as_of`: when the counts were taken; on a dataset this small, by the call itself.
    const withoutAsOf = (body: Record<string, unknown>) => Object.fromEntries(Object.entries(body).filter(([k]) => k !== 'as_of'));
    let calledAt = 0;
    const progress = await eventually(async () => {
      calledAt = Date.now();
      const res = await get('/datasets/ds_progress/progress');
      expect(res.status, res.text).to.equal(200);
      return JSON.stringify(withoutAsOf(res.body)) === JSON.stringify(expected) ? res : undefined;
    }, 20_000, 'the progress of the six writes');
    expect(progress.headers.get('cache-control')).to.equal('no-store');
    expect(Date.parse(progress.body.as_of)).to.be.within(calledAt - 1_000, Date.now() + 1_000);
    // Each record's status settles to what its responses give. A recount that counted before the
    // discarded version was stored may write `completed` a moment after the progress above was
    // read, and its check then writes `pending` again (worker/completion.ts): the final state is
    // what is asserted, polled with a bound (CI, 2026-11-26: read once, it caught that moment).
    const statuses = async () => Promise.all(ids.map(async (id) => (await get(`/feedback-record/${id}`)).body.status as string));
    const settled = await eventually(async () => {
      const now = await statuses();
      return JSON.stringify(now) === JSON.stringify(['completed', 'pending', 'pending']) ? now : undefined;
    }, 20_000, 'the records\' statuses to settle').catch(async (err: Error) => {
      throw new Error(`${err.message}: ${JSON.stringify(await statuses())}`);
    });
    expect(settled).to.deep.equal(['completed', 'pending', 'pending']);

    // The typed client reads the same.
    const client = createFeedbackClient({ baseUrl: stack.baseUrl, apiKey: READER.secret });
    expect(withoutAsOf(await client.getProgress('ds_progress'))).to.deep.equal(expected);
  });

  it('a dataset without a rule: completion null, records stay submitted (neither pending nor completed)', async () => {
    const created = await stack.post('/feedback-record', recordBody({ record: { feedback_dataset_id: 'ds_norule' } }));
    expect(created.status).to.equal(200);
    const res = await eventually(async () => {
      const r = await get('/datasets/ds_norule/progress');
      return r.body?.records?.total === 1 ? r : undefined;
    }, 15_000, 'the record stored');
    expect(res.body).to.deep.include({ completion: null, records: { total: 1, pending: 0, completed: 0 } });
    expect((await get(`/feedback-record/${created.body.feedback_record_id}`)).body.status).to.equal('submitted');
  });

  it('progress: read scope only (403 for a write-only key), unknown parameters are 400', async () => {
    expect((await get('/datasets/ds_progress/progress', TEST_KEY.secret)).status).to.equal(403);
    const bad = await get('/datasets/ds_progress/progress?status=pending');
    expect(bad.status).to.equal(400);
    expect(bad.body.error.code).to.equal('validation_failed');
  });

  it('GET /feedback-record/{id}/history: each response with its versions oldest first, at most RESPONSE_HISTORY_MAX earlier ones (the oldest dropped first)', async () => {
    const created = await stack.post('/feedback-record', recordBody({ record: { feedback_dataset_id: 'ds_history' }, response: { user_id: 'end-user', values: { helpful: 0 } } }));
    const id: string = created.body.feedback_record_id;
    for (let v = 1; v <= 5; v++) {
      const res = await stack.post('/feedback-response', { feedback_record_id: id, response: { status: v % 2 === 0 ? 'draft' : 'submitted', values: { helpful: v }, user_id: 'annotator' } });
      expect(res.status, res.text).to.equal(200);
    }
    const res = await eventually(async () => {
      const r = await get(`/feedback-record/${id}/history`);
      const annotator = r.body?.responses?.[1];
      return annotator?.versions?.at(-1)?.values?.helpful === 5 ? r : undefined;
    }, 20_000, 'the fifth version stored');
    expect(res.body.feedback_record_id).to.equal(id);
    expect(res.body.responses).to.have.length(2);
    expect(res.body.responses[0].user_id).to.equal('end-user');
    expect(res.body.responses[0].versions.map((x: { values: { helpful: number } }) => x.values.helpful)).to.deep.equal([0]);
    const versions = res.body.responses[1].versions as { status: string; values: { helpful: number }; seq: number; updated_at: string }[];
    expect(versions.map((x) => x.values.helpful), 'three earlier versions and the current one').to.deep.equal([2, 3, 4, 5]);
    expect(versions.map((x) => x.status)).to.deep.equal(['draft', 'submitted', 'draft', 'submitted']);
    expect(versions.every((x, i) => i === 0 || x.seq > versions[i - 1]!.seq), 'ascending acceptance order').to.equal(true);
    expect(versions.every((x) => new Date(x.updated_at).toISOString() === x.updated_at)).to.equal(true);
    for (const internal of ['api_key', 'request_id']) expect(versions[0], internal).to.not.have.property(internal);

    const client = createFeedbackClient({ baseUrl: stack.baseUrl, apiKey: READER.secret });
    expect(await client.getRecordHistory(id)).to.deep.equal(res.body);
    // The record read does not carry the history.
    expect((await get(`/feedback-record/${id}`)).body.responses[1]).to.not.have.property('history');
    // Neither read takes a parameter: an unknown one is 400, as on the other reads.
    for (const path of [`/feedback-record/${id}/history?limit=5`, `/feedback-record/${id}?x=1`]) {
      const refused = await get(path);
      expect(refused.status, path).to.equal(400);
      expect(refused.body.error.details[0], path).to.include({ message: 'is not a known property' });
    }
  });

  it('history: 404 record_not_found for an unknown id, 403 for a write-only key', async () => {
    const unknown = await get('/feedback-record/rec_nope/history');
    expect(unknown.status).to.equal(404);
    expect(unknown.body.error.code).to.equal('record_not_found');
    const created = await stack.post('/feedback-record', recordBody({ record: { feedback_dataset_id: 'ds_history' } }));
    expect((await get(`/feedback-record/${created.body.feedback_record_id}/history`, TEST_KEY.secret)).status).to.equal(403);
    const client = createFeedbackClient({ baseUrl: stack.baseUrl, apiKey: TEST_KEY.secret, retry: { maxAttempts: 1 } });
    const err = await client.getRecordHistory(created.body.feedback_record_id).catch((e: unknown) => e);
    expect(err).to.be.instanceOf(FeedbackApiError);
  });
});

describe('response history in the store round (worker/response-history.ts)', () => {
  let client: MongoClient;
  let db: Db;
  beforeEach(async () => {
    client = new MongoClient(sharedServices().mongoUrl, { ...mongoClientOptions(), retryWrites: false });
    db = client.db(uniqueName('history').replace(/-/g, '_'));
    await ensureIndexes(db);
  });
  afterEach(async () => {
    await db.dropDatabase().catch(() => undefined);
    await client.close();
  });

  const BASE = 2 ** 50 + 5_000_000;
  function version(v: number): SequencedWrite {
    const write: ResponseWrite = {
      kind: 'response',
      request_id: `req-${v}`,
      accepted_at: 1_700_000_100_000 + v,
      api_key: 'tester',
      record_id: recordWrite(1).write.record_id,
      response_id: 'rsp_history',
      response: { status: 'draft', values: { v, text: '$not_a_field_path' }, user_id: 'ann' },
    };
    return { write, seq: BASE + v, index: 0 };
  }
  const historyOf = async () => {
    const doc = await db.collection<ResponseDoc>(COLLECTIONS.responses).findOne({ _id: 'rsp_history' });
    return { current: doc?.values['v'], history: doc === null ? [] : earlierVersions(doc).map((h) => h.values['v']), doc };
  };
  /** The quick form's condition holds: `history` ends with the stored version. */
  const endsWithCurrent = (doc: ResponseDoc | null | undefined) => doc?.history_has_current === true && doc.history?.at(-1)?.seq === doc.seq;

  it('keeps the replaced version; a job run twice and a stale version add nothing; the versions between stored and newest in one round are kept too; cap 3 drops the oldest', async () => {
    const w = createFeedbackWriter({ db, logger: silentLogger, historyMax: 3 });
    await w.write([recordWrite(1)]);
    await w.write([version(1)]);
    expect(await historyOf()).to.deep.include({ current: 1, history: [] });
    await w.write([version(3)]);
    expect(await historyOf()).to.deep.include({ current: 3, history: [1] });
    await w.write([version(3)]);
    expect((await historyOf()).history, 'the same job again').to.deep.equal([1]);
    expect((await w.write([version(2)]))[0]!.kind).to.equal('stale');
    expect((await historyOf()).history, 'a stale version').to.deep.equal([1]);
    // One round with versions 4, 5, 6: 6 is written, 3 (stored), 4 and 5 go into the history.
    await w.write([version(5), version(4), version(6)]);
    const after = await historyOf();
    expect(after).to.deep.include({ current: 6, history: [3, 4, 5] });
    expect(after.doc?.history?.[0]).to.deep.include({ status: 'draft', seq: BASE + 3, request_id: 'req-3' });
    expect(after.doc?.values, 'a "$…" string stays a string').to.deep.equal({ v: 6, text: '$not_a_field_path' });
    // The same round again: nothing new.
    await w.write([version(5), version(4), version(6)]);
    expect((await historyOf()).history).to.deep.equal([3, 4, 5]);
    // A round with a version older than the stored one (5 < 6) and a newer one: only 6 moves to the history.
    await w.write([version(5), version(7)]);
    const last = await historyOf();
    expect(last).to.deep.include({ current: 7, history: [4, 5, 6] });
    expect(endsWithCurrent(last.doc), 'history ends with the stored version').to.equal(true);
  });

  it('a response stored without history in its last form (an earlier release, or RESPONSE_HISTORY_MAX 0) keeps its stored version in the history of the next one', async () => {
    const responses = db.collection<ResponseDoc>(COLLECTIONS.responses);
    const w = createFeedbackWriter({ db, logger: silentLogger, historyMax: 3 });
    await w.write([recordWrite(1)]);
    await w.write([version(1)]);
    // As an earlier release stored it: `history` holds the earlier versions only, no marker.
    const v2 = version(2).write as ResponseWrite;
    await responses.updateOne({ _id: 'rsp_history' }, { $set: { seq: BASE + 2, values: v2.response.values, request_id: 'req-2', history: [{ status: 'draft', values: { v: 1 }, seq: BASE + 1, updated_at: new Date(), request_id: 'req-1' }] }, $unset: { history_has_current: '' } });
    await w.write([version(3)]);
    const upgraded = await historyOf();
    expect(upgraded).to.deep.include({ current: 3, history: [1, 2] });
    expect(endsWithCurrent(upgraded.doc)).to.equal(true);
    // Stored with RESPONSE_HISTORY_MAX 0, then with history again: the version stored meanwhile is kept.
    await createFeedbackWriter({ db, logger: silentLogger, historyMax: 0 }).write([version(4)]);
    expect((await historyOf()).doc).to.not.have.property('history_has_current');
    await w.write([version(5)]);
    expect(await historyOf()).to.deep.include({ current: 5, history: [1, 2, 3, 4].slice(-3) });
  });

  it('RESPONSE_HISTORY_MAX 0 keeps no history', async () => {
    const w = createFeedbackWriter({ db, logger: silentLogger, historyMax: 0 });
    await w.write([recordWrite(1)]);
    await w.write([version(1)]);
    await w.write([version(2)]);
    expect((await historyOf()).doc).to.not.have.property('history');
  });
});
