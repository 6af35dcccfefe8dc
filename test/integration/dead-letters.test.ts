import { expect } from 'chai';
import { createDeadLetterAdmin, type DeadLetterAdmin } from '../../shared/dead-letter-admin.js';
import { createIdMinter } from '../../shared/ids.js';
import { COLLECTIONS } from '../../shared/mongo.js';
import { WRITE_JOB_NAME } from '../../shared/queue.js';
import { JOB_PAYLOAD_VERSION } from '../../shared/job-payload.js';
import { runDeadLettersCommand } from '../../scripts/dead-letters.js';
import { OTHER_KEY, testConfig, TEST_KEY } from '../helpers/env.js';
import { deadLetters, eventually, records, responses, startStack, type HttpResult, type Stack } from '../helpers/stack.js';
import { runCli } from '../helpers/cli.js';

const ADMIN = { name: 'ops', secret: 'ops-secret-key-0003' } as const;
const API_KEYS = `${TEST_KEY.name}:${TEST_KEY.secret},${OTHER_KEY.name}:${OTHER_KEY.secret},${ADMIN.name}:${ADMIN.secret}`;

describe('dead-letter tools', () => {
  let stack: Stack;
  let tools: DeadLetterAdmin;
  const adminRequest = (path: string, method = 'GET'): Promise<HttpResult> => stack.request(path, { method, headers: { Authorization: `Bearer ${ADMIN.secret}` } });
  const cli = async (...argv: string[]) => {
    const out: string[] = [];
    const err: string[] = [];
    const code = await runDeadLettersCommand(argv, tools, { out: (l) => out.push(l), err: (l) => err.push(l) });
    return { code, out, err };
  };

  // One attempt: a response whose record is not stored is dead-lettered as record_not_stored at once.
  before(async () => {
    stack = await startStack(testConfig({ API_KEYS, ADMIN_API_KEY_NAMES: ADMIN.name, JOB_ATTEMPTS: '1' }));
    tools = createDeadLetterAdmin({ db: stack.db, queues: stack.api.queues, compression: stack.config.queueCompression });
  });
  after(async () => {
    await stack?.close();
  });

  let orphanRecordId: string;
  let orphanLetterId: string;
  let poisonLetterId: string;

  before('dead-letter a response to a record that was never stored, and a malformed write', async () => {
    // A record id the API would accept (signed with its secret) whose record never arrives.
    orphanRecordId = createIdMinter(stack.config.idSigningSecrets).newRecordId('ds_dl');
    const res = await stack.post('/feedback-response', { feedback_record_id: orphanRecordId, response: { status: 'submitted', values: { helpful: 5 }, user_id: 'ann-dl' } });
    expect(res.status).to.equal(200);
    const orphan = await eventually(async () => (await deadLetters(stack.db).findOne({ record_id: orphanRecordId })) ?? undefined, 15_000, 'record_not_stored dead letter');
    expect(orphan['reason']).to.equal('record_not_stored');
    expect(orphan['user_id'], 'the letter names its annotator beside the payload').to.equal('ann-dl');
    orphanLetterId = orphan._id;

    // A poison write, queued past the API (as an older or buggy producer might).
    const job = await stack.api.queue.add(WRITE_JOB_NAME, { v: JOB_PAYLOAD_VERSION, writes: [{ kind: 'response', record_id: 'rec_x', poison: true }] } as never);
    const poison = await eventually(async () => (await deadLetters(stack.db).findOne({ job_id: job.id! })) ?? undefined, 15_000, 'malformed_write dead letter');
    expect(poison['reason']).to.equal('malformed_write');
    poisonLetterId = poison._id;
  });

  it('GET /admin/dead-letters lists newest first, filters by reason, pages with a cursor', async () => {
    const all = await adminRequest('/admin/dead-letters');
    expect(all.status).to.equal(200);
    expect(all.body.items.map((d: { id: string }) => d.id)).to.deep.equal([poisonLetterId, orphanLetterId]);
    expect(all.body.next_cursor).to.equal(null);
    expect(all.body.items[1]).to.include({ reason: 'record_not_stored', record_id: orphanRecordId });
    expect(all.body.items[1]).to.not.have.property('payload_json');

    const filtered = await adminRequest('/admin/dead-letters?reason=malformed_write');
    expect(filtered.body.items.map((d: { id: string }) => d.id)).to.deep.equal([poisonLetterId]);

    const first = await adminRequest('/admin/dead-letters?limit=1');
    expect(first.body.items.map((d: { id: string }) => d.id)).to.deep.equal([poisonLetterId]);
    expect(first.body.next_cursor).to.be.a('string');
    const second = await adminRequest(`/admin/dead-letters?limit=1&cursor=${encodeURIComponent(first.body.next_cursor)}`);
    expect(second.body.items.map((d: { id: string }) => d.id)).to.deep.equal([orphanLetterId]);
    expect(second.body.next_cursor).to.equal(null);

    for (const bad of ['reason=nope', 'limit=0', 'limit=501', 'cursor=garbage', 'colour=red']) {
      const res = await adminRequest(`/admin/dead-letters?${bad}`);
      expect(res.status, bad).to.equal(400);
      expect(res.body.error.code).to.equal('validation_failed');
    }
  });

  it('GET /admin/dead-letters/:id shows one with its payload; unknown ids are 404', async () => {
    const res = await adminRequest(`/admin/dead-letters/${encodeURIComponent(orphanLetterId)}`);
    expect(res.status).to.equal(200);
    expect(res.body).to.include({ id: orphanLetterId, reason: 'record_not_stored', record_id: orphanRecordId });
    expect(res.body.seq).to.be.a('number');
    expect(res.body.payload).to.deep.include({ kind: 'response', record_id: orphanRecordId });
    expect(JSON.parse(res.body.payload_json)).to.deep.equal(res.body.payload);

    const poison = await adminRequest(`/admin/dead-letters/${encodeURIComponent(poisonLetterId)}`);
    expect(poison.body.payload).to.deep.equal({ kind: 'response', record_id: 'rec_x', poison: true });

    const missing = await adminRequest('/admin/dead-letters/no-such-letter');
    expect(missing.status).to.equal(404);
    expect(missing.body.error.code).to.equal('not_found');
  });

  it('a poison write cannot be retried (409 dead_letter_not_retryable) and stays', async () => {
    const res = await adminRequest(`/admin/dead-letters/${encodeURIComponent(poisonLetterId)}/retry`, 'POST');
    expect(res.status).to.equal(409);
    expect(res.body.error.code).to.equal('dead_letter_not_retryable');
    expect(res.body.error.message).to.include('poison');
    expect(await deadLetters(stack.db).countDocuments({ _id: poisonLetterId })).to.equal(1);
    const viaCli = await cli('retry', poisonLetterId);
    expect(viaCli.code).to.equal(1);
    expect(viaCli.out.join('\n')).to.include('not retryable');
  });

  it('a valid write is retried through the queue, keeps its seq, is stored exactly once, even if retried twice', async () => {
    const letter = (await deadLetters(stack.db).findOne({ _id: orphanLetterId }))!;
    // What the operator fixes first: the record arrives (restored from elsewhere).
    await records(stack.db).insertOne({ _id: orphanRecordId, feedback_dataset_id: 'ds_dl', field_to_value: { prompt: 'p' }, status: 'submitted', created_at: new Date(), updated_at: new Date() });

    const res = await adminRequest(`/admin/dead-letters/${encodeURIComponent(orphanLetterId)}/retry`, 'POST');
    expect(res.status).to.equal(200);
    expect(res.body).to.include({ outcome: 'requeued', id: orphanLetterId, seq: letter['seq'] });
    expect(await deadLetters(stack.db).countDocuments({ _id: orphanLetterId })).to.equal(0);
    const payload = JSON.parse(letter['payload_json'] as string) as { response_id: string };
    const stored = await eventually(async () => (await responses(stack.db).findOne({ _id: payload.response_id })) ?? undefined, 15_000, 'the retried response');
    expect(stored).to.include({ feedback_record_id: orphanRecordId, user_id: 'ann-dl', status: 'submitted', seq: letter['seq'] });

    // The same dead letter again (a retry whose delete was lost): the CLI queues it, the worker
    // stores nothing new.
    await deadLetters(stack.db).insertOne(letter);
    const again = await cli('retry', orphanLetterId);
    expect(again.code, again.err.join('\n')).to.equal(0);
    const jobId = /requeued as job (\S+)/.exec(again.out.join('\n'))?.[1];
    expect(jobId).to.be.a('string');
    await eventually(async () => ((await (await stack.api.queue.getJob(jobId!))?.isCompleted()) === true ? true : undefined), 15_000, 'second retry processed');
    expect(await responses(stack.db).countDocuments({ feedback_record_id: orphanRecordId })).to.equal(1);
    expect(await deadLetters(stack.db).countDocuments({ record_id: orphanRecordId })).to.equal(0);

    const gone = await adminRequest(`/admin/dead-letters/${encodeURIComponent(orphanLetterId)}/retry`, 'POST');
    expect(gone.status).to.equal(404);
  });

  it('purge: one over HTTP; bulk from the CLI only with --yes', async () => {
    const extra = { reason: 'malformed_job', error: 'e', queue: stack.config.queueName, write_index: null, request_id: null, record_id: null, seq: null, payload_json: '{}', failed_at: new Date() };
    await deadLetters(stack.db).insertMany([
      { _id: 'x:1:job', job_id: '1', ...extra },
      { _id: 'x:2:job', job_id: '2', ...extra },
    ]);
    const del = await adminRequest(`/admin/dead-letters/${encodeURIComponent(poisonLetterId)}`, 'DELETE');
    expect(del.status).to.equal(200);
    expect(del.body).to.deep.equal({ id: poisonLetterId, purged: true });
    expect((await adminRequest(`/admin/dead-letters/${encodeURIComponent(poisonLetterId)}`)).status).to.equal(404);
    expect((await adminRequest(`/admin/dead-letters/${encodeURIComponent(poisonLetterId)}`, 'DELETE')).status).to.equal(404);

    const refused = await cli('purge', '--reason', 'malformed_job');
    expect(refused.code).to.equal(2);
    expect(await deadLetters(stack.db).countDocuments({})).to.equal(2);
    const purged = await cli('purge', '--reason', 'malformed_job', '--yes');
    expect(purged.code).to.equal(0);
    expect(purged.out).to.deep.equal(['purged 2 dead letters']);
    expect(await stack.db.collection(COLLECTIONS.deadLetters).countDocuments({})).to.equal(0);
  });

  it('the dead-letters CLI as a process: list --json, show, purge', async function () {
    this.timeout(60_000);
    await deadLetters(stack.db).insertOne({ _id: 'cli:1:0', reason: 'store_rejected', error: 'nested arrays', queue: stack.config.queueName, job_id: '1', write_index: 0, request_id: 'r', record_id: null, seq: 7, payload_json: '{"kind":"record"}', failed_at: new Date() });
    const listed = await runCli('scripts/dead-letters-main.ts', ['list', '--json'], stack.config, API_KEYS);
    expect(listed.code, listed.stderr).to.equal(0);
    expect((JSON.parse(listed.stdout) as { items: { id: string }[] }).items.map((d) => d.id)).to.deep.equal(['cli:1:0']);
    const shown = await cli('show', 'cli:1:0');
    expect(JSON.parse(shown.out.join('\n'))).to.include({ id: 'cli:1:0', reason: 'store_rejected', seq: 7 });
    expect((await cli('purge', '--all')).code).to.equal(2);
    expect((await runCli('scripts/dead-letters-main.ts', ['purge', 'cli:1:0'], stack.config, API_KEYS)).stdout).to.include('purged cli:1:0');
    expect(await deadLetters(stack.db).countDocuments({})).to.equal(0);
  });
});
