import assert from 'node:assert/strict';
import { OVERSIZE_BODY_LIMIT_BYTES } from '../helpers/oversize.js';
import { request } from 'node:http';
import { Cluster, LEDGER_KEY, until } from './cluster.js';
import { answerOf, NoAnswer, send, type HttpAnswer } from './http.js';
import { assertBalanced, Ledger } from './ledger.js';
import { faultScope } from './scope.js';
import { msg, type ServiceProcess } from '../../devkit/processes.js';
import { ledgerFigures, recordScenario } from './report.js';
import { decodeJob } from '../../shared/job-payload.js';
import { RecordsPendingError } from '../../worker/errors.js';

/**
 * Fault scenarios against the real `web` and `worker` processes, a durable Redis (AOF) and
 * FerretDB, each scenario with its own. Every scenario runs a load through the ledger while the
 * fault happens, lets the queue drain, and compares the ledger with MongoDB.
 *
 * Loads are a few hundred to about a thousand requests per scenario, so that the whole suite
 * stays within a few minutes.
 */

/**
 * BullMQ's stalled-job check runs every JOB_STALLED_INTERVAL_MS (2 s in these clusters) and a job
 * must be seen twice by it, so a job held by a killed worker runs again within ~4 s.
 */
const STALLED_RECOVERY_MS = 2 * 2_000;
const SHUTDOWN_TIMEOUT_MS = 8_000;

/**
 * The job ended `completed`, and every attempt of it that failed on the way failed with
 * RecordsPendingError: a response whose record is in a job not stored yet is retried by design.
 * BullMQ keeps such an attempt's `failedReason` on the job after it completes (a kill -9 test
 * that asked for none failed CI once in six runs, 2026-11-27), so the state and the reasons of
 * the failed attempts are what tell.
 */
async function assertCompleted(c: Cluster, id: string, what: string): Promise<void> {
  const job = await c.queue().getJob(id);
  const state = job === undefined ? 'gone' : await job.getState();
  const otherFailures = (job?.stacktrace ?? []).filter((trace) => !trace.startsWith(`${RecordsPendingError.name}:`));
  const seen = JSON.stringify({ state, attemptsMade: job?.attemptsMade, stalledCounter: job?.stalledCounter, failedReason: job?.failedReason, otherFailures });
  assert.ok(state === 'completed' && otherFailures.length === 0, `job ${id} ${what} did not complete, or failed for another reason than its records pending: ${seen}`);
}

async function drained(c: Cluster, timeoutMs: number): Promise<void> {
  try {
    await until(async () => ((await c.pendingJobs()) === 0 ? true : undefined), timeoutMs, 'the queue to drain', 250);
  } catch (err) {
    // Where the jobs are tells a stuck worker (active: a job that never ends) from a worker that stopped taking jobs (waiting).
    const states = ['waiting', 'active', 'delayed', 'prioritized'] as const;
    const counts = await Promise.all(states.map(async (s) => `${s} ${await c.queues().count(s).catch(() => Number.NaN)}`));
    throw new Error(`${(err as Error).message}; jobs: ${counts.join(', ')}`, { cause: err });
  }
}

/**
 * No process logged an unhandled error or rejection, and nothing bypassed the logger: every line
 * on stdout and stderr is a pino JSON line (raw stderr output escapes redaction and log shipping).
 */
function assertNoUnhandled(procs: readonly ServiceProcess[]): void {
  for (const p of procs) {
    const unhandled = p.lines.filter((l) => /unhandled/i.test(String(l.json?.['msg'] ?? '')));
    assert.deepEqual(unhandled.map((l) => l.raw), [], `${p.name} ${p.pid} logged unhandled errors`);
  }
  for (const p of procs) {
    const raw = p.lines.filter((l) => l.json === undefined && l.raw.trim() !== '');
    assert.deepEqual(raw.slice(0, 12).map((l) => `${l.stream}: ${l.raw}`), [], `${p.name} ${p.pid} wrote ${raw.length} line(s) outside the logger`);
  }
}

function fiveXx(ledger: Ledger): number {
  return ledger.entries.filter((e) => e.status !== undefined && e.status >= 500).length;
}

describe('fault scenarios (real processes, durable Redis, FerretDB; ledger)', function () {
  const scope = faultScope();

  it('a second worker starts on a database that already has its indexes (restart, replica)', async function () {
    const c = (scope.cluster = await new Cluster({ label: 'second-worker' }).start());
    const [api, w1] = await Promise.all([c.startApi(), c.startWorker()]);
    const l = (scope.ledger = new Ledger('w2nd'));
    await l.load({ targets: () => [api.url], total: 20, concurrency: 4 }).done;
    await drained(c, 30_000);
    // Fails with "MongoDB not ready; retrying index creation" for ever when index creation is not idempotent on the store.
    const w2 = await c.startWorker();
    await l.load({ targets: () => [api.url], total: 20, concurrency: 4 }).done;
    await drained(c, 30_000);
    const r = await l.verify(c.db());
    assertBalanced(r);
    assert.ok(w1.alive() && w2.alive());
    assert.ok(!w2.lines.some(msg('MongoDB not ready; retrying index creation')), 'the second worker could not create its indexes');
  });

  it('kill -9 of the worker mid-batch, a new worker starts: no loss, no duplicate', async function () {
    const c = (scope.cluster = await new Cluster({ label: 'worker-kill-9' }).start());
    const [api, w1] = await Promise.all([c.startApi(), c.startWorker()]);
    const l = (scope.ledger = new Ledger('wk9'));
    const run = l.load({ targets: () => [api.url], total: 600, concurrency: 32, responseShare: 0.6, ratePerSecond: 60 });

    // Mid-batch: the worker holds at least one job and has already stored some.
    const active = await until(async () => {
      const stored = w1.lines.filter(msg('job stored')).length;
      const jobs = await c.queue().getActive();
      return stored >= 5 && jobs.length > 0 ? jobs.map((j) => j.id!) : undefined;
    }, 60_000, 'the worker to be inside a job', 20);
    const killedAt = Date.now();
    await w1.kill();
    const w2 = await c.startWorker();

    await run.done;
    await drained(c, STALLED_RECOVERY_MS + 60_000);
    const drainedAt = Date.now();
    const r = await l.verify(c.db());
    recordScenario(this.test!.fullTitle(), ledgerFigures('worker SIGKILL mid-batch', r, { jobs_held_by_killed_worker: active.length, recovery_seconds: Math.round((drainedAt - killedAt) / 1000) }, fiveXx(l)));
    assertBalanced(r);
    assert.equal(r.outcomes.acked, r.requests, 'the API must answer 200 to everything while only the worker dies');
    // The jobs the dead worker held were run again, to completion, by the new one.
    for (const id of active) await assertCompleted(c, id, 'held by the killed worker');
    assert.ok(w2.lines.some(msg('job stored')), 'the new worker stored nothing');
    assert.equal(await c.failedJobs(), 0);
    assert.deepEqual(await c.deadLetters(), []);
    assertNoUnhandled([api, w2]);
  });

  it('kill -9 of the API mid-burst: every 200 received is stored; the restarted API goes on', async function () {
    const c = (scope.cluster = await new Cluster({ label: 'api-kill-9' }).start());
    const [api1, worker] = await Promise.all([c.startApi(), c.startWorker()]);
    const l = (scope.ledger = new Ledger('ak9'));
    let targets = [api1.url];
    const run = l.load({ targets: () => targets, total: 600, concurrency: 40, responseShare: 0.6 });

    await until(() => (l.acked >= 200 ? true : undefined), 60_000, '200 acknowledged writes', 5);
    await api1.kill();
    const inFlightLost = l.entries.filter((e) => e.outcome === 'pending').length;
    targets = [];
    const api2 = await c.startApi({}, api1.port);
    targets = [api2.url];

    await run.done;
    await drained(c, 90_000);
    const r = await l.verify(c.db());
    recordScenario(this.test!.fullTitle(), ledgerFigures('API SIGKILL mid-burst', r, { in_flight_at_kill: inFlightLost }, fiveXx(l)));
    assertBalanced(r);
    assert.ok(r.outcomes.unknown > 0, 'no request was in flight when the API died: the scenario did not test a burst');
    assert.ok(l.entries.some((e) => e.outcome === 'acked' && e.target === api2.url && e.n > 0), 'the restarted API acknowledged nothing');
    assert.equal(await c.failedJobs(), 0);
    assert.deepEqual(await c.deadLetters(), []);
    assertNoUnhandled([api2, worker]);
  });

  it('FerretDB stopped 30 s under load: the API keeps accepting, the worker waits without using attempts, the backlog drains', async function () {
    // 30 s is many times the store retry delay (1 s) and the MongoDB timeout (1.5 s): the worker
    // goes through many delayed retries, each of which would burn an attempt if it counted.
    const OUTAGE_MS = 30_000;
    const c = (scope.cluster = await new Cluster({ label: 'ferretdb-down' }).start());
    const [api, worker] = await Promise.all([c.startApi(), c.startWorker()]);
    const l = (scope.ledger = new Ledger('fdb'));
    // 1,200 requests at 30/s: the load runs before, through and after the outage.
    const run = l.load({ targets: () => [api.url], total: 1200, concurrency: 24, responseShare: 0.6, ratePerSecond: 30 });

    await until(() => (worker.lines.filter(msg('job stored')).length >= 5 ? true : undefined), 60_000, 'the worker to store some jobs');
    await c.mongo.stop();
    const downAt = Date.now();
    const ackedBefore = l.acked;
    // The outage itself lasts a fixed time: that is the fault, not a wait for a condition.
    await new Promise((r) => setTimeout(r, OUTAGE_MS));
    const delayedDuringOutage = worker.lines.filter(msg('store unavailable; queue paused')).length;
    await c.mongo.start();
    const upAt = Date.now();

    await run.done;
    await drained(c, 120_000);
    const r = await l.verify(c.db());
    const duringOutage = l.entries.filter((e) => e.startedAt >= downAt && e.startedAt < upAt);
    recordScenario(this.test!.fullTitle(), ledgerFigures(`FerretDB stopped ${OUTAGE_MS / 1000} s`, r, { accepted_during_outage: duringOutage.filter((e) => e.outcome === 'acked').length, store_retries_during_outage: delayedDuringOutage }, fiveXx(l)));
    assertBalanced(r);
    assert.ok(l.acked - ackedBefore > 0 && duringOutage.length > 600, 'the load did not run through the outage');
    assert.deepEqual(duringOutage.filter((e) => e.outcome !== 'acked').map((e) => `${e.tag}: ${e.outcome} ${e.status ?? ''} ${e.code ?? ''}`), [], 'the API refused writes while only MongoDB was down');
    assert.ok(delayedDuringOutage > 0, 'the worker never noticed the outage');
    assert.equal(await c.failedJobs(), 0, 'jobs failed during the MongoDB outage');
    assert.deepEqual(await c.deadLetters(), [], 'writes were dead-lettered during the MongoDB outage');
    assert.ok(api.alive() && worker.alive());
    assertNoUnhandled([api, worker]);
  });

  it('Redis stopped: 503 queue_unavailable within 1 s, /readyz 503; restarted with AOF: queued jobs kept, API and worker recover by themselves', async function () {
    const c = (scope.cluster = await new Cluster({ label: 'redis-down' }).start());
    const [api, worker] = await Promise.all([c.startApi(), c.startWorker()]);
    const l = (scope.ledger = new Ledger('rds'));
    const run = l.load({ targets: () => [api.url], total: 600, concurrency: 20, responseShare: 0.6, ratePerSecond: 50 });

    await until(() => (l.acked >= 150 ? true : undefined), 60_000, '150 acknowledged writes');
    // Every job Redis knows of just before the stop, whatever its state.
    const redis = c.redisClient();
    const known = [
      ...(await redis.lrange(c.key('wait'), 0, -1)),
      ...(await redis.lrange(c.key('active'), 0, -1)),
      ...(await redis.zrange(c.key('delayed'), '0', '-1')),
      ...(await redis.zrange(c.key('completed'), '0', '-1')),
    ];
    const waitingAtStop = await redis.llen(c.key('wait'));
    await c.redis.stop();
    const downAt = Date.now();

    // While Redis is down: every write is refused at once with the documented 503.
    await until(async () => ((await send(api.url, '/readyz', { method: 'GET' })).status === 503 ? true : undefined), 5_000, '/readyz to turn 503');
    const probes = await Promise.all(
      Array.from({ length: 30 }, async (_, i) => {
        const started = Date.now();
        const res = await send(api.url, i % 3 === 2 ? '/feedback-response' : '/feedback-record', {
          headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${LEDGER_KEY.secret}`, ...(i % 2 === 0 ? { 'Idempotency-Key': `probe-${i}` } : {}) },
          body: JSON.stringify(i % 3 === 2 ? { feedback_record_id: l.entries.find((e) => e.kind === 'record' && e.outcome === 'acked')!.recordId, response: { status: 'draft', values: { probe: i } } } : { record: { feedback_dataset_id: 'probe', field_to_value: { q: `probe-${i}` } }, response: { values: { probe: i } } }),
        });
        return { ms: Date.now() - started, status: res.status, code: (res.json as { error?: { code?: string } } | undefined)?.error?.code, retryAfter: res.headers['retry-after'] };
      }),
    );
    const readyz = await send(api.url, '/readyz', { method: 'GET' });
    // The load keeps running into the outage for a while.
    await until(() => (l.entries.filter((e) => e.startedAt > downAt + 300 && e.endedAt !== undefined).length >= 100 ? true : undefined), 20_000, 'the load to run into the outage');

    await c.redis.start();
    const upAt = Date.now();
    // AOF: every job known before the stop is still there.
    const missing: string[] = [];
    for (const id of known) if ((await redis.exists(c.key(id))) === 0) missing.push(id);
    await until(async () => ((await send(api.url, '/readyz', { method: 'GET' })).status === 200 ? true : undefined), 20_000, '/readyz to turn 200 again');

    await run.done;
    await drained(c, 90_000);
    const r = await l.verify(c.db());
    const outage = l.entries.filter((e) => e.startedAt >= downAt + 100 && e.endedAt !== undefined && e.endedAt < upAt);
    const afterRestart = l.entries.filter((e) => e.startedAt > upAt + 3_000);
    recordScenario(
      this.test!.fullTitle(),
      ledgerFigures('Redis stopped and restarted (AOF)', r, {
        jobs_known_at_stop: known.length,
        jobs_waiting_at_stop: waitingAtStop,
        jobs_missing_after_restart: missing.length,
        answers_503_during_outage: outage.filter((e) => e.status === 503).length,
        slowest_503_ms: Math.max(...probes.map((p) => p.ms)),
      }, fiveXx(l) - l.entries.filter((e) => e.code === 'queue_unavailable').length),
    );
    for (const p of probes) {
      assert.equal(p.status, 503, JSON.stringify(p));
      assert.equal(p.code, 'queue_unavailable');
      assert.match(String(p.retryAfter), /^\d+$/);
      assert.ok(p.ms < 1_000, `a write took ${p.ms} ms to be refused while Redis was down`);
    }
    assert.equal(readyz.status, 503);
    assert.deepEqual(outage.filter((e) => !(e.status === 503 && e.code === 'queue_unavailable')).map((e) => `${e.tag}: ${e.outcome} ${e.status ?? ''} ${e.code ?? ''} ${e.ms ?? ''} ms`), [], 'during the outage every write must get 503 queue_unavailable');
    assert.ok(outage.every((e) => e.ms! < 1_000), `slowest refusal during the outage: ${Math.max(...outage.map((e) => e.ms!))} ms`);
    assert.ok(known.length > 0);
    assert.deepEqual(missing, [], 'jobs queued before the stop were lost by the restart');
    assert.ok(afterRestart.length > 0 && afterRestart.every((e) => e.outcome === 'acked'), 'the API did not recover after Redis came back');
    assertBalanced(r);
    assert.ok(api.alive() && worker.alive(), 'a process died (recovery must need no restart)');
    assert.ok(worker.lines.filter((ln) => msg('job stored')(ln) && ln.at > upAt).length > 0, 'the worker stored nothing after the restart');
    assert.equal(await c.failedJobs(), 0);
    assert.deepEqual(await c.deadLetters(), []);
    assertNoUnhandled([api, worker]);
  });

  it('rolling restart (SIGTERM to API and worker under load): in-flight requests complete, nothing lost, exit within SHUTDOWN_TIMEOUT_MS', async function () {
    const c = (scope.cluster = await new Cluster({ label: 'rolling-restart', env: { SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_TIMEOUT_MS) } }).start());
    const [apiA, w1] = await Promise.all([c.startApi(), c.startWorker()]);
    const l = (scope.ledger = new Ledger('roll'));
    let targets = [apiA.url];
    const run = l.load({ targets: () => targets, total: 600, concurrency: 30, responseShare: 0.6, ratePerSecond: 50 });
    await until(() => (l.acked >= 150 ? true : undefined), 60_000, '150 acknowledged writes');

    // API: the new one joins, the old one leaves the rotation and gets SIGTERM while requests are
    // in flight, among them one whose body is still arriving.
    const apiB = await c.startApi();
    targets = [apiA.url, apiB.url];
    const slowReq = l.prepare(apiA.url);
    const slow = slowRequest(apiA.port, slowReq.path, slowReq.headers, slowReq.body);
    await slow.headersSent;
    targets = [apiB.url];
    // Requests already routed to A reach it (local loopback: well under 100 ms).
    await new Promise((r) => setTimeout(r, 100));
    const inFlightAtTerm = l.entries.filter((e) => e.target === apiA.url && e.outcome === 'pending').length;
    const apiTermAt = Date.now();
    apiA.signal('SIGTERM');
    await apiA.waitForLog(msg('shutting down'), 5_000, 'shutting down');
    slow.finish();
    const slowAnswer = await slow.answer;
    l.settle(slowReq.entry, slowAnswer);
    const apiExit = await apiA.exited;

    // Worker: the old one gets SIGTERM and finishes its jobs while the new one boots.
    const workerTermAt = Date.now();
    w1.signal('SIGTERM');
    const [w2, workerExit] = await Promise.all([c.startWorker(), w1.exited]);

    await run.done;
    await drained(c, 90_000);
    const r = await l.verify(c.db());
    const toA = l.entries.filter((e) => e.target === apiA.url);
    recordScenario(this.test!.fullTitle(), ledgerFigures('rolling restart (SIGTERM) of API and worker', r, {
      in_flight_at_api_sigterm: inFlightAtTerm + 1,
      api_exit_ms: apiExit.at - apiTermAt,
      worker_exit_ms: workerExit.at - workerTermAt,
    }, fiveXx(l)));

    // The ledger checks that it is stored like every other request.
    assert.ok(!(slowAnswer instanceof NoAnswer), `the request in flight at SIGTERM got no answer: ${slowAnswer instanceof NoAnswer ? slowAnswer.message : ''}`);
    assert.equal(slowAnswer.status, 200, `the request in flight at SIGTERM got ${slowAnswer.status} ${slowAnswer.text}`);
    assert.deepEqual(toA.filter((e) => e.outcome !== 'acked').map((e) => `${e.tag}: ${e.outcome} ${e.status ?? ''} ${e.code ?? ''}`), [], 'requests sent to the API before its SIGTERM must complete');
    assert.equal(apiExit.code, 0, 'the API did not shut down cleanly');
    assert.ok(apiExit.at - apiTermAt <= SHUTDOWN_TIMEOUT_MS, `API took ${apiExit.at - apiTermAt} ms to exit`);
    assert.ok(apiA.lines.some(msg('shut down cleanly')));
    assert.equal(workerExit.code, 0, 'the worker did not shut down cleanly');
    assert.ok(workerExit.at - workerTermAt <= SHUTDOWN_TIMEOUT_MS, `worker took ${workerExit.at - workerTermAt} ms to exit`);
    assertBalanced(r);
    assert.equal(r.outcomes.acked, r.requests, 'a rolling restart must not refuse or drop any request');
    assert.equal(await c.failedJobs(), 0);
    assert.deepEqual(await c.deadLetters(), []);
    assertNoUnhandled([apiA, apiB, w1, w2]);
  });

  // A write over the store's 16 MiB limit is refused by the worker before it is sent
  // (worker/document-size.ts): sent in a batch it made the driver refuse the whole command and
  // every write of the round go one at a time, which under CPU starvation held jobs past their lock.
  it('poison writes are dead-lettered with their reason; the other writes of the same batch are stored', async function () {
    // Poison is a document over 16 MiB: the API must take bodies that large, and jobs must close
    // later than that to hold it with good writes.
    // Jobs of 16 MiB writes are slow to move on two busy cores: a lock of two minutes, so that a
    // slow round is not taken for a dead worker (not what this scenario tests; the stalled-job
    // scenarios do). Without it, on the twelfth session's machine, jobs lost their lock and ran
    // again, with the code of before and after that session alike.
    const c = (scope.cluster = await new Cluster({ label: 'poison', env: { BODY_LIMIT_BYTES: OVERSIZE_BODY_LIMIT_BYTES, BATCH_MAX_BYTES: String(64 * 1024 * 1024), JOB_LOCK_MS: '120000' } }).start());
    const [api, worker] = await Promise.all([c.startApi(), c.startWorker()]);
    const l = (scope.ledger = new Ledger('psn'));
    // A burst, so that jobs carry many writes and poison shares its job with good writes.
    const run = l.load({ targets: () => [api.url], total: 300, concurrency: 30, responseShare: 0.4, poisonEvery: 9 });
    await run.done;
    await drained(c, 150_000);
    const r = await l.verify(c.db());
    const letters = await c.deadLetters();
    const poison = l.entries.filter((e) => e.poison && e.outcome === 'acked');
    let sharedJobs = 0;
    let neighboursStored = 0;
    for (const letter of letters) {
      const job = await c.queue().getJob(String(letter['job_id']));
      const decoded = job === undefined ? undefined : decodeJob(job.data); // plain or deflated (QUEUE_COMPRESSION)
      const writes = decoded?.ok === true ? (decoded.writes as { request_id: string }[]) : [];
      const others = writes.filter((w) => w.request_id !== letter['request_id']);
      if (others.length > 0) sharedJobs++;
      neighboursStored += others.filter((w) => l.entries.find((e) => e.tag === w.request_id)?.poison === false).length;
      assert.equal(letter['reason'], 'store_rejected');
      assert.ok(String(letter['error']).length > 0);
      assert.ok(String(letter['payload_json']).includes(String(letter['request_id'])), 'the dead letter does not keep the write');
      await assertCompleted(c, String(letter['job_id']), 'of a dead letter');
    }
    recordScenario(this.test!.fullTitle(), ledgerFigures('poison writes (documents over 16 MiB) among good ones', r, { poison_acknowledged: poison.length, jobs_shared_with_good_writes: sharedJobs, good_writes_in_those_jobs: neighboursStored }, fiveXx(l)));
    assert.ok(poison.length >= 15, `only ${poison.length} poison writes were acknowledged`);
    assertBalanced(r);
    assert.equal(r.deadLettered, poison.length, 'every poison write is dead-lettered once');
    // A poison write whose answer was lost (outcome unknown: it may have been queued) may have a
    // letter too; nothing else may.
    const mayHaveLetter = new Set(l.entries.filter((e) => e.poison && (e.outcome === 'acked' || e.outcome === 'unknown')).map((e) => e.tag));
    assert.deepEqual(letters.filter((x) => !mayHaveLetter.has(String(x['request_id']))).map((x) => String(x['request_id'])), [], 'dead letters of writes that were not poison, or were refused');
    assert.equal(new Set(letters.map((x) => String(x['request_id']))).size, letters.length, 'a write with two dead letters');
    assert.ok(sharedJobs > 0 && neighboursStored > 0, 'no poison write shared its job with good writes: the scenario did not test batches');
    assert.equal(await c.failedJobs(), 0);
    assertNoUnhandled([api, worker]);
  });
});

/** A POST whose headers and first half of the body go now, the rest when `finish()` is called. */
function slowRequest(port: number, path: string, headers: Record<string, string>, body: string): { headersSent: Promise<void>; finish(): void; answer: Promise<HttpAnswer | NoAnswer> } {
  const buf = Buffer.from(body);
  const half = Math.floor(buf.length / 2);
  let sent!: () => void;
  const headersSent = new Promise<void>((r) => (sent = r));
  const req = request({ host: '127.0.0.1', port, method: 'POST', path, agent: false, headers: { ...headers, 'Content-Length': String(buf.length) } });
  const answer = answerOf(req);
  req.flushHeaders();
  req.write(buf.subarray(0, half), () => sent());
  return { headersSent, finish: () => req.end(buf.subarray(half)), answer };
}
