import { expect } from 'chai';
import { Webhook } from 'standardwebhooks';
import type { RecordDoc, ResponseDoc } from '../../shared/documents.js';
import { newErasureId } from '../../shared/erasures.js';
import { createIdMinter } from '../../shared/ids.js';
import { decodeJob } from '../../shared/job-payload.js';
import { COLLECTIONS } from '../../shared/mongo.js';
import { orderFloorAt } from '../../shared/order-clock.js';
import { appKeyPrefix } from '../../shared/redis-keys.js';
import { decodeBatch } from '../../worker/batch-lines.js';
import { WEBHOOK_EVENT_TYPES } from '../../shared/webhook-events.js';
import { createCompletionTracker } from '../../worker/completion.js';
import { createCompletionEvents } from '../../worker/completion-events.js';
import type { SequencedWrite } from '../../worker/documents.js';
import { createErasureEvents } from '../../worker/erasure-events.js';
import { createEraser, type ErasureItem } from '../../worker/erasures.js';
import { TransientStoreError } from '../../worker/errors.js';
import { createEventOutbox } from '../../worker/event-outbox.js';
import { createRoundEvents } from '../../worker/round-events.js';
import { createFeedbackWriter, type FeedbackWriter } from '../../worker/writer.js';
import { testConfig, TEST_KEY } from '../helpers/env.js';
import { eventually, silentLogger, startStack, type Stack } from '../helpers/stack.js';
import { startWebhookReceiver } from '../helpers/webhook-receiver.js';
import { ADMIN, adminRequest, deduped, failingFirstInsert, outboxEvents, record, subscribeTo, WEBHOOK_ENV, type Event } from '../helpers/webhook-stack.js';
import { fixedRules } from '../helpers/fixed-rules.js';

/* The events that describe more than one write: response.erased (an erasure) and record.completed (a completion rule). */

describe('webhooks: response.erased', function () {
  this.timeout(60_000);
  let stack: Stack;
  before(async () => {
    stack = await startStack(testConfig({ ...WEBHOOK_ENV, ERASURE_SETTLE_MS: '0' }));
  });
  after(async () => {
    await stack?.close();
  });

  const respond = (recordId: string, user: string, value: number) => stack.post('/feedback-response', { feedback_record_id: recordId, response: { status: 'submitted', values: { helpful: value }, user_id: user } });
  const responseDocs = () => stack.db.collection<ResponseDoc>(COLLECTIONS.responses);
  /** Waits until the response holds `value` (the version sent is stored). */
  const storedWith = (responseId: string, value: number) =>
    eventually(async () => ((await responseDocs().findOne({ _id: responseId }))?.values['helpful'] === value ? true : undefined), 20_000, `${responseId} stored with ${value}`);

  it('an erasure delivers exactly one response.erased per response it removed, naming the erasure, after that response\'s other events', async () => {
    const receiver = await startWebhookReceiver();
    try {
      const { secret } = await subscribeTo(stack, receiver.url, ['ds_erased'], WEBHOOK_EVENT_TYPES);
      const user = 'end-user-erased';
      // Three records the user created (their first responses are the user's), one answered by another annotator too;
      // a record someone else created, which the user answered and then changed.
      const created = await Promise.all([1, 2, 3].map((n) => stack.post('/feedback-record', record('ds_erased', n, user))));
      const kept = await stack.post('/feedback-record', record('ds_erased', 4, 'someone-else'));
      const firsts = [...created, kept].map((r) => r.body.feedback_response_id as string);
      await eventually(async () => ((await responseDocs().countDocuments({ _id: { $in: firsts } })) === firsts.length ? true : undefined), 20_000, 'the records stored');
      const other = await respond(created[0]!.body.feedback_record_id, 'ann-other', 7);
      const mine = await respond(kept.body.feedback_record_id, user, 1);
      await storedWith(mine.body.feedback_response_id, 1);
      expect((await respond(kept.body.feedback_record_id, user, 2)).status).to.equal(200);
      await storedWith(mine.body.feedback_response_id, 2);
      await storedWith(other.body.feedback_response_id, 7);

      const accepted = await adminRequest(stack, '/admin/erasures', 'POST', { user_id: user });
      expect(accepted.status, accepted.text).to.equal(202);
      const erasureId = accepted.body.erasure_id as string;
      const done = await eventually(async () => {
        const res = await adminRequest(stack, `/admin/erasures/${erasureId}`);
        return res.body.status === 'done' ? res.body : undefined;
      }, 30_000, 'the erasure done');
      // The user's three records with both their responses, and the user's response to the kept record.
      const recordOfRemoved = new Map<string, string>([
        ...created.map((r) => [r.body.feedback_response_id, r.body.feedback_record_id] as [string, string]),
        [other.body.feedback_response_id, created[0]!.body.feedback_record_id],
        [mine.body.feedback_response_id, kept.body.feedback_record_id],
      ]);
      const removed = [...recordOfRemoved.keys()];
      expect(done.removed.responses).to.equal(removed.length);

      const erasedEvents = () => deduped(receiver).filter((e) => e.type === 'response.erased');
      await eventually(async () => (erasedEvents().length >= removed.length ? true : undefined), 30_000, `${removed.length} response.erased`);
      await stack.worker!.webhooks.dispatcher.runOnce();
      await new Promise((r) => setTimeout(r, 300));
      const events = deduped(receiver);
      const erased = events.filter((e) => e.type === 'response.erased');
      expect(erased.map((e) => e.data['feedback_response_id']).sort()).to.deep.equal([...removed].sort());
      for (const e of erased) {
        const id = e.data['feedback_response_id'] as string;
        expect(e.data).to.deep.equal({ feedback_response_id: id, feedback_record_id: recordOfRemoved.get(id), feedback_dataset_id: 'ds_erased', erasure_id: erasureId });
        // After every other event of that response that was delivered at all (those still waiting
        // when the erasure ran were deleted with the data they carry: worker/erasure-outbox.ts).
        const at = events.indexOf(e);
        const earlier = events.filter((x) => x.type !== 'response.erased' && x.data['feedback_response_id'] === id);
        for (const x of earlier) expect(events.indexOf(x), `${x.type} of ${id} before its response.erased`).to.be.lessThan(at);
      }
      expect(erased.filter((e) => e.data['feedback_response_id'] === kept.body.feedback_response_id), 'someone else\'s response is kept').to.have.length(0);
      const mineEvents = events.filter((e) => e.data['feedback_response_id'] === mine.body.feedback_response_id).map((e) => e.type);
      expect(mineEvents.at(-1)).to.equal('response.erased');
      expect(mineEvents.slice(0, -1).every((t) => t === 'response.created' || t === 'response.updated'), mineEvents.join(', ')).to.equal(true);
      // The outbox keeps no event that carries the erased data: none of the responses' own, no
      // record.created or record.completed of the erased records; their response.erased stay.
      // (In the outbox and in the batches not moved into it yet.)
      const appended = await outboxEvents(stack.db);
      const createdRecords = new Set(created.map((r) => r.body.feedback_record_id as string));
      expect(appended.filter((e) => removed.includes(e.subject_id) && ['response.created', 'response.updated'].includes(e.event_type))).to.have.length(0);
      expect(appended.filter((e) => createdRecords.has(e.key) && ['record.created', 'record.completed'].includes(e.event_type))).to.have.length(0);
      expect(appended.filter((e) => e.key === kept.body.feedback_record_id && e.event_type === 'record.created'), 'the kept record\'s own event stays').to.have.length(1);
      // Its order is the erasure's: after every write of the user accepted before it.
      const tombstone = await stack.db.collection<{ _id: string; seq: number }>(COLLECTIONS.erasures).findOne({ _id: erasureId });
      const deliveries = appended.filter((e) => e.event_type === 'response.erased' && e.dataset_id === 'ds_erased');
      expect(new Set(deliveries.map((d) => d.seq))).to.deep.equal(new Set([tombstone!.seq]));
      for (const r of receiver.received) new Webhook(secret).verify(r.body, r.headers as Record<string, string>);
    } finally {
      await receiver.close();
    }
  });

  it('an outbox outage while a sweep announces its removals leaves the responses stored: the retried sweep announces each once, then removes it', async () => {
    const receiver = await startWebhookReceiver();
    try {
      await subscribeTo(stack, receiver.url, ['ds_erased_outage'], ['response.erased']);
      const user = 'end-user-outage';
      const created = await Promise.all([1, 2, 3].map((n) => stack.post('/feedback-record', record('ds_erased_outage', n, user))));
      const ids = created.map((r) => r.body.feedback_response_id as string);
      await eventually(async () => ((await responseDocs().countDocuments({ _id: { $in: ids } })) === ids.length ? true : undefined), 20_000, 'the responses stored');

      // The worker's eraser and outbox on the real store, whose outbox is unreachable for its first append.
      const failing = failingFirstInsert(stack.db, COLLECTIONS.webhookBatches);
      const outbox = createEventOutbox({ db: failing.db, subscriptions: stack.worker!.webhooks.subscriptions, logger: silentLogger });
      const eraser = createEraser({
        db: stack.db, redis: stack.worker!.redis, appKeyPrefix: appKeyPrefix(stack.config), ids: createIdMinter(stack.config.idSigningSecrets), logger: silentLogger, settleMs: 0,
        removing: createErasureEvents({ outbox }),
      });
      const highest = await responseDocs().find({ user_id: user }).sort({ seq: -1 }).limit(1).next();
      const erasureId = newErasureId(createIdMinter(stack.config.idSigningSecrets), undefined);
      const item: ErasureItem = {
        write: { kind: 'erasure', request_id: 'req-erasure-outage', accepted_at: Date.now(), api_key: ADMIN.name, record_id: erasureId, response_id: erasureId, erasure: { user_id: user, records: 'keep' } },
        seq: highest!.seq + 1,
        index: 0,
      };
      const first = await eraser.begin([item]).then(() => undefined, (err: unknown) => err);
      expect(first, 'the outage fails the attempt').to.be.instanceOf(TransientStoreError);
      expect(failing.failures()).to.equal(1);
      expect(await responseDocs().countDocuments({ _id: { $in: ids } }), 'nothing removed before it is announced').to.equal(ids.length);
      // The job's retry.
      await eraser.begin([item]);
      await eraser.finish([item]);
      expect(await responseDocs().countDocuments({ _id: { $in: ids } })).to.equal(0);

      await eventually(async () => (deduped(receiver).length >= ids.length ? true : undefined), 20_000, `${ids.length} response.erased`);
      await stack.worker!.webhooks.dispatcher.runOnce();
      await new Promise((r) => setTimeout(r, 300));
      const erased = deduped(receiver);
      expect(erased.map((e) => e.data['feedback_response_id']).sort()).to.deep.equal([...ids].sort());
      expect(erased.every((e) => e.type === 'response.erased' && e.data['erasure_id'] === erasureId)).to.equal(true);
    } finally {
      await receiver.close();
    }
  });
});

describe('webhooks: record.completed', function () {
  this.timeout(60_000);
  const DEFINITION = { fields: [{ name: 'prompt', type: 'text' }, { name: 'answer', type: 'text' }], questions: [{ name: 'helpful', type: 'number' }] };
  let stack: Stack;
  before(async () => {
    stack = await startStack(testConfig({ ...WEBHOOK_ENV }), { worker: false });
    const put = await adminRequest(stack, '/datasets/ds_complete', 'PUT', { ...DEFINITION, completion: { min_submitted: 2 } });
    expect(put.status, put.text).to.equal(201);
    // Started after the PUT as before; the worker reads the rules with each round anyway.
    await stack.startWorker();
  });
  after(async () => {
    await stack?.close();
  });

  const respond = (recordId: string, user: string, status: 'submitted' | 'draft', value: number) =>
    stack.post('/feedback-response', { feedback_record_id: recordId, response: { status, values: { helpful: value }, user_id: user } });
  const responseDocs = () => stack.db.collection<ResponseDoc>(COLLECTIONS.responses);
  const recordDocs = () => stack.db.collection<RecordDoc>(COLLECTIONS.records);
  const statusIs = (recordId: string, status: string) =>
    eventually(async () => ((await recordDocs().findOne({ _id: recordId }))?.status === status ? true : undefined), 20_000, `${recordId} ${status}`);
  const storedSeq = async (responseId: string, value: number) =>
    eventually(async () => {
      const doc = await responseDocs().findOne({ _id: responseId });
      return doc?.values['helpful'] === value ? doc.seq : undefined;
    }, 20_000, `${responseId} stored with ${value}`);

  it('the second annotator\'s submitted response completes the record: one event holding both responses, after that response\'s; draft and back: a second id; the job run again: no new id', async () => {
    const receiver = await startWebhookReceiver();
    try {
      const { secret } = await subscribeTo(stack, receiver.url, ['ds_complete'], WEBHOOK_EVENT_TYPES);
      const created = await stack.post('/feedback-record', record('ds_complete', 1, 'ann-a'));
      const recordId = created.body.feedback_record_id as string;
      await storedSeq(created.body.feedback_response_id, 1);
      const b = await respond(recordId, 'ann-b', 'submitted', 5);
      const bSeq = await storedSeq(b.body.feedback_response_id, 5);
      await statusIs(recordId, 'completed');

      const completedEvents = () => deduped(receiver).filter((e) => e.type === 'record.completed');
      await eventually(async () => (completedEvents().length >= 1 ? true : undefined), 20_000, 'record.completed');
      const first = completedEvents()[0]!;
      // Its id names the order of the write whose storing completed it.
      expect(first.id).to.equal(`evt_record_completed_${recordId}_${bSeq}`);
      const view = (await adminRequest(stack, `/feedback-record/${recordId}`)).body;
      expect(first.data).to.deep.equal(view);
      expect(view.status).to.equal('completed');
      expect((first.data['responses'] as { user_id: string }[]).map((r) => r.user_id)).to.deep.equal(['ann-a', 'ann-b']);
      // record.created says what the record was when stored: pending under the rule (its first response alone), as GET said then.
      const createdEvent = deduped(receiver).find((e) => e.type === 'record.created' && e.data['feedback_record_id'] === recordId);
      expect(createdEvent?.data['status']).to.equal('pending');
      const order = (events: Event[], pick: (e: Event) => boolean) => events.findIndex(pick);
      let events = deduped(receiver);
      expect(order(events, (e) => e.id === first.id)).to.be.greaterThan(order(events, (e) => e.type === 'response.created' && e.data['user_id'] === 'ann-b'));

      // Back to pending (no event), then completed again: a second event with another id, after the response that completed it.
      expect((await respond(recordId, 'ann-a', 'draft', 2)).status).to.equal(200);
      await statusIs(recordId, 'pending');
      expect((await respond(recordId, 'ann-a', 'submitted', 3)).status).to.equal(200);
      const aSeq = await storedSeq(created.body.feedback_response_id, 3);
      await statusIs(recordId, 'completed');
      await eventually(async () => (completedEvents().length >= 2 ? true : undefined), 20_000, 'a second record.completed');
      events = deduped(receiver);
      const second = completedEvents()[1]!;
      expect(second.id).to.equal(`evt_record_completed_${recordId}_${aSeq}`);
      expect(order(events, (e) => e.id === second.id)).to.be.greaterThan(order(events, (e) => e.type === 'response.updated' && e.data['values']?.helpful === 3));

      // The job that completed it again runs once more (same writes, same orders), as after a crash before it completed.
      const jobs = await stack.api.queue.getJobs(['completed']);
      const again = jobs.find((job) => {
        const decoded = decodeJob(job.data);
        return decoded.ok && decoded.writes.some((w) => (w as { seq?: number }).seq === aSeq);
      });
      expect(again, 'the job of the write that completed it').to.not.equal(undefined);
      const rerun = await stack.api.queue.add(again!.name, again!.data);
      await eventually(async () => ((await rerun.getState()) === 'completed' ? true : undefined), 20_000, 'the job run again');
      expect((await stack.api.queue.getJob(rerun.id!))?.returnvalue, 'the same write, applied again over its own version').to.include({ responses: 1, dead_lettered: 0 });
      await stack.worker!.webhooks.dispatcher.runOnce();
      await new Promise((r) => setTimeout(r, 500));
      expect(completedEvents().map((e) => e.id)).to.deep.equal([first.id, second.id]);
      expect((await outboxEvents(stack.db)).filter((e) => e.key === recordId && e.event_type === 'record.completed')).to.have.length(2);
      for (const r of receiver.received) new Webhook(secret).verify(r.body, r.headers as Record<string, string>);
    } finally {
      await receiver.close();
    }
  });

  describe('an outbox outage while a round appends its record.completed', () => {
    const DATASETS: Record<string, number> = { ds_complete_outage: 2, ds_complete_first: 1 };
    const at = 1_700_000_000_000;
    const recordWrite = (dataset: string, n: number, seq: number): SequencedWrite => ({
      write: {
        kind: 'record', request_id: `req-${dataset}-${n}`, accepted_at: at + n, api_key: TEST_KEY.name, record_id: `rec_${dataset}_${n}`, response_id: `rsp_${dataset}_${n}_a`,
        record: { feedback_dataset_id: dataset, field_to_value: { prompt: `q${n}` } }, response: { status: 'submitted', values: { helpful: 1 }, user_id: 'ann-a' },
      },
      seq, index: 0,
    });
    const responseWrite = (dataset: string, n: number, seq: number): SequencedWrite => ({
      write: {
        kind: 'response', request_id: `req-${dataset}-${n}-b`, accepted_at: at + n + 1, api_key: TEST_KEY.name, record_id: `rec_${dataset}_${n}`, response_id: `rsp_${dataset}_${n}_b`,
        response: { status: 'submitted', values: { helpful: 2 }, user_id: 'ann-b' },
      },
      seq, index: 0,
    });

    /** The worker's writer, completion and outbox on the real store, whose outbox is unreachable for the first append holding a record.completed. */
    function writerWithOutage() {
      const failing = failingFirstInsert(stack.db, COLLECTIONS.webhookBatches, (docs) => docs.some((d) => decodeBatch(d).some((e) => e.event_type === 'record.completed')));
      const outbox = createEventOutbox({ db: failing.db, subscriptions: stack.worker!.webhooks.subscriptions, logger: silentLogger });
      const completion = createCompletionTracker({
        db: stack.db,
        rules: fixedRules((id) => (DATASETS[id] === undefined ? undefined : { min_submitted: DATASETS[id] })),
        onCompleting: createCompletionEvents({ db: stack.db, outbox }),
      });
      return { failing, writer: createFeedbackWriter({ db: stack.db, logger: silentLogger, completion, events: createRoundEvents({ db: stack.db, outbox }) }) };
    }

    /** The job's attempt fails with the outage, the next one goes through. */
    async function writeTwice(writer: FeedbackWriter, items: SequencedWrite[]): Promise<void> {
      const failed = await writer.write(items).then(() => undefined, (err: unknown) => err);
      expect(failed, 'the outage fails the round').to.be.instanceOf(TransientStoreError);
      expect((await writer.write(items)).map((r) => r.kind)).to.not.include('rejected');
    }

    it('a record completed by a later response: the job\'s retry appends it, once, after that response\'s event', async () => {
      const receiver = await startWebhookReceiver();
      try {
        await subscribeTo(stack, receiver.url, ['ds_complete_outage'], WEBHOOK_EVENT_TYPES);
        const { failing, writer } = writerWithOutage();
        const base = orderFloorAt(Date.now());
        await writer.write([recordWrite('ds_complete_outage', 1, base + 64)]);
        await writeTwice(writer, [responseWrite('ds_complete_outage', 1, base + 128)]);
        expect(failing.failures()).to.equal(1);
        expect((await recordDocs().findOne({ _id: 'rec_ds_complete_outage_1' }))?.status).to.equal('completed');
        await eventually(async () => (deduped(receiver).length >= 4 ? true : undefined), 20_000, 'the record\'s four events');
        await stack.worker!.webhooks.dispatcher.runOnce();
        await new Promise((r) => setTimeout(r, 300));
        const events = deduped(receiver);
        expect(events.map((e) => e.type)).to.deep.equal(['record.created', 'response.created', 'response.created', 'record.completed']);
        expect(events[3]!.id).to.equal(`evt_record_completed_rec_ds_complete_outage_1_${base + 128}`);
      } finally {
        await receiver.close();
      }
    });

    it('a record inserted completed (min_submitted 1): the job\'s retry appends it, once', async () => {
      const receiver = await startWebhookReceiver();
      try {
        await subscribeTo(stack, receiver.url, ['ds_complete_first'], ['record.completed']);
        const { failing, writer } = writerWithOutage();
        const seq = orderFloorAt(Date.now());
        await writeTwice(writer, [recordWrite('ds_complete_first', 1, seq)]);
        expect(failing.failures()).to.equal(1);
        await eventually(async () => (deduped(receiver).length >= 1 ? true : undefined), 20_000, 'record.completed');
        await stack.worker!.webhooks.dispatcher.runOnce();
        await new Promise((r) => setTimeout(r, 300));
        expect(deduped(receiver).map((e) => e.id)).to.deep.equal([`evt_record_completed_rec_ds_complete_first_1_${seq}`]);
      } finally {
        await receiver.close();
      }
    });
  });
});
