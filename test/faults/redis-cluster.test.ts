import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Cluster, until } from './cluster.js';
import { Ledger, type LedgerReport } from './ledger.js';
import { faultScope } from './scope.js';
import { ARTIFACTS, msg, type ServiceProcess } from '../../devkit/processes.js';
import { ledgerFigures, recordScenario } from './report.js';

/**
 * The service on a real Redis Cluster (3 masters + 3 replicas, cluster-node-timeout 2 s, AOF
 * everysec), with the write queue in 6 hash-tagged shards: several API and worker processes, and
 * a master killed mid-burst. The ledger compares every answer with what MongoDB holds.
 */

async function drained(c: Cluster, timeoutMs: number): Promise<void> {
  await until(async () => ((await c.pendingJobs()) === 0 ? true : undefined), timeoutMs, 'every shard to drain', 250);
}

/**
 * Ledger problems that only a lost write explains (its version, or a later one, never arrived).
 * The ledger lists 40 problems at most; the loss figure itself comes from the counts.
 */
const LOSS = /is not stored|is not the last acknowledged|more problems not listed/;

function assertNoDuplicateOrStray(r: LedgerReport): void {
  assert.equal(r.outcomes.pending, 0);
  assert.equal(r.duplicated, 0, 'duplicates stored');
  assert.ok(r.acknowledged > 0, 'nothing was acknowledged: the scenario did not run');
}

function assertBalanced(r: LedgerReport): void {
  assert.deepEqual(r.problems, [], `the ledger does not balance:\n${r.problems.join('\n')}`);
  assertNoDuplicateOrStray(r);
}

function assertNoUnhandled(procs: readonly ServiceProcess[]): void {
  for (const p of procs) {
    const unhandled = p.lines.filter((l) => /unhandled/i.test(String(l.json?.['msg'] ?? '')));
    assert.deepEqual(unhandled.map((l) => l.raw), [], `${p.name} ${p.pid} logged unhandled errors`);
  }
}

/** Connection errors that end a request without an answer but are not a hang: the client saw the connection close. */
const CONNECTION_LOST = new Set(['ECONNRESET', 'EPIPE']);

/**
 * Every request got an answer (a 503 at worst): none hung until the client gave up, and no API
 * process died (a dead process resets the connections it held; the primary replaces it). A
 * connection reset with no process gone is allowed at 1 in 1,000 requests (CI saw one in 3,000
 * once, 2026-11-25; not reproduced in 8 runs since): its outcome is unknown to the client, and the
 * ledger accepts it stored or not, as for a lost answer.
 */
function assertAnswered(entries: Ledger['entries'], procs: readonly ServiceProcess[]): void {
  const unanswered = entries.filter((e) => e.status === undefined);
  const resets = unanswered.filter((e) => e.code !== undefined && CONNECTION_LOST.has(e.code));
  assert.deepEqual(unanswered.filter((e) => !resets.includes(e)).map((e) => `${e.tag}: ${e.code ?? ''} after ${e.ms ?? ''} ms`), [], 'requests without an answer');
  const died = procs.flatMap((p) => p.lines.filter((l) => msg('api process died')(l)).map((l) => l.raw));
  assert.deepEqual(died, [], 'an API process died');
  assert.ok(resets.length <= Math.floor(entries.length / 1000), `connections reset without an answer: ${resets.map((e) => `${e.tag}: ${e.code ?? ''}`).join(', ')}`);
}

/** Saves the figure the trade-off table of docs/reliability.md quotes (test-artifacts/faults/redis-cluster-loss.json). */
function saveLossFigure(name: string, figures: Record<string, unknown>): void {
  const dir = join(ARTIFACTS, 'faults');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, `redis-cluster-${name}.json`), `${JSON.stringify(figures, null, 2)}\n`);
  process.stdout.write(`      redis cluster ${name}: ${JSON.stringify(figures)}\n`);
}

describe('fault scenarios on a Redis Cluster (3 masters + 3 replicas, 6 queue shards; ledger)', function () {
  // A failover scenario's own bounded waits (load, kill, two heals, the drain) add up past the
  // suite's 180 s on two busy cores; each wait keeps its own bound and message.
  this.timeout(360_000);
  const scope = faultScope();

  it('2 API and 3 worker processes under load: every acknowledged write stored exactly once, updates in acceptance order', async function () {
    const c = (scope.cluster = await new Cluster({ label: 'cluster-5-procs', redisCluster: true }).start());
    const procs = await Promise.all([c.startApi(), c.startApi(), c.startWorker(), c.startWorker(), c.startWorker()]);
    const [a1, a2, ...workers] = procs;
    const l = (scope.ledger = new Ledger('c5p'));
    await l.load({ targets: () => [a1!.url, a2!.url], total: 500, concurrency: 24, responseShare: 0.6 }).done;
    await drained(c, 90_000);
    const r = await l.verify(c.db());
    recordScenario(this.test!.fullTitle(), ledgerFigures('Redis Cluster, 2 API + 3 workers', r, { shards: 6, workers_storing: workers.filter((w) => w.lines.some(msg('job stored'))).length }));
    assertBalanced(r);
    assert.equal(r.outcomes.acked, r.requests, 'every write must be acknowledged while nothing fails');
    assert.equal(await c.failedJobs(), 0);
    assert.deepEqual(await c.deadLetters(), []);
    assertNoUnhandled(procs);
  });

  /**
   * Kills (SIGKILL) the master holding shard 0 while a burst runs, lets the cluster promote its
   * replica, then restarts the killed node (as a supervisor would), which rejoins as a replica.
   *
   * On loopback a replica trails its master by well under a millisecond, so a plain kill almost
   * never catches a write the replica lacks. Here the replica lags as a slow link would make it:
   * it is frozen (SIGSTOP) and a ballast larger than the kernel's socket buffers (tcp_rmem max
   * 32 MiB here) is written to the master in the shard's slot, so that the writes after it wait in
   * the master's memory, not in a socket the replica reads once thawed. The kill then loses them.
   */
  async function masterKilledMidBurst(c: Cluster, l: Ledger, title: string, minReplicasAck: number) {
    const procs = await Promise.all([c.startApi(), c.startWorker(), c.startWorker()]);
    const [api, ...workers] = procs;
    // Runs until stopped below, once enough writes were sent after the cluster healed.
    const run = l.load({ targets: () => [api!.url], total: 5_000, concurrency: 24, responseShare: 0.6, ratePerSecond: 70 });
    await until(() => (l.acked >= 150 ? true : undefined), 60_000, '150 acknowledged writes', 5);
    const nodes = c.redisNodes!;
    const shard0 = c.queues().shards[0]!.shard;
    const victim = await nodes.masterOf(await nodes.slotOf(shard0.slotKey));
    const [replica] = await nodes.replicasOf(victim);
    assert.ok(replica !== undefined, 'the master of shard 0 has no replica');
    replica.pause();
    const ballast = 'x'.repeat(32 * 1024 * 1024);
    for (let i = 0; i < 2; i++) await c.clusterClient().set(`${shard0.prefix}:test-ballast-${i}`, ballast);
    const laggingFrom = Date.now();
    await until(() => (l.entries.filter((e) => e.startedAt > laggingFrom && e.endedAt !== undefined).length >= 80 ? true : undefined), 30_000, '80 writes answered while the replica lags', 10);
    await victim.kill();
    replica.resume();
    const killedAt = Date.now();
    await nodes.waitHealthy(30_000);
    const promotedAt = Date.now();
    await victim.start();
    await nodes.waitHealthy(30_000);
    const rejoinedAt = Date.now();
    // The clients' slot maps catch up within their refresh interval (1 s): judge recovery on what follows.
    const settledAt = rejoinedAt + 2_000;
    await until(() => (l.entries.filter((e) => e.startedAt > settledAt && e.endedAt !== undefined).length >= 100 ? true : undefined), 60_000, '100 writes answered after the cluster healed', 20);
    run.stop();
    await run.done;
    // Jobs whose locks lapsed while the cluster was down run again after the stalled check, and
    // responses that raced ahead of their records retry with backoff: allow for a loaded machine.
    await drained(c, 180_000);
    const r = await l.verify(c.db());
    const during = l.entries.filter((e) => e.startedAt >= killedAt && e.startedAt < rejoinedAt);
    const after = l.entries.filter((e) => e.startedAt > settledAt);
    const figures0 = ledgerFigures('', r);
    const lost = figures0.lost;
    const figures = {
      min_replicas_ack: minReplicasAck,
      failover_seconds: Math.round((promotedAt - killedAt) / 100) / 10,
      requests_during_failover: during.length,
      answers_503_during_failover: during.filter((e) => e.status === 503).length,
      acknowledged_during_failover: during.filter((e) => e.outcome === 'acked').length,
      acknowledged_writes_lost: lost,
    };
    recordScenario(title, ledgerFigures(`Redis Cluster master SIGKILL mid-burst, REDIS_MIN_REPLICAS_ACK=${minReplicasAck}`, r, figures));
    saveLossFigure(`failover-ack${minReplicasAck}`, { ...figures, requests: r.requests, acknowledged: r.acknowledged });

    assertAnswered(l.entries, procs);
    assert.deepEqual(l.entries.filter((e) => e.status !== undefined && e.status >= 500 && !(e.status === 503 && e.code === 'queue_unavailable')).map((e) => `${e.tag}: ${e.status ?? ''} ${e.code ?? ''}`), [], 'only 503 queue_unavailable while a master fails over');
    // The API and the workers recovered by themselves: same processes, writes acknowledged and stored after.
    assert.ok(after.length > 0 && after.every((e) => e.outcome === 'acked'), `the API did not recover: ${after.filter((e) => e.outcome !== 'acked').length} of ${after.length} refused after the cluster healed`);
    assert.ok(procs.every((p) => p.alive()), 'a process died');
    assert.ok(workers.some((w) => w.lines.some((ln) => msg('job stored')(ln) && ln.at > rejoinedAt)), 'no worker stored anything after the failover');
    assert.equal(await c.failedJobs(), 0);
    assertNoUnhandled(procs);
    return { r, lost };
  }

  it('kill -9 of a master mid-burst with REDIS_MIN_REPLICAS_ACK=1: replica promoted, 503s not hangs, recovery by itself, 0 acknowledged writes lost, order kept', async function () {
    const c = (scope.cluster = await new Cluster({ label: 'cluster-failover-wait', redisCluster: true, env: { REDIS_MIN_REPLICAS_ACK: '1' } }).start());
    const l = (scope.ledger = new Ledger('cfw'));
    const { r } = await masterKilledMidBurst(c, l, this.test!.fullTitle(), 1);
    assertBalanced(r);
    assert.deepEqual(await c.deadLetters(), []);
  });

  it('kill -9 of a master mid-burst, writes routed around it (SHARD_REROUTE): >= 99% answered 200 during and after, 0 lost, 0 duplicated, order kept', async function () {
    // FAULT_SHARD_REROUTE=false runs the same scenario without rerouting (the mutation: the
    // availability assertion fails, as issue 26 measured 30% of 503s).
    const reroute = process.env['FAULT_SHARD_REROUTE'] ?? 'true';
    const c = (scope.cluster = await new Cluster({ label: 'cluster-reroute', redisCluster: true, env: { REDIS_MIN_REPLICAS_ACK: '1', SHARD_REROUTE: reroute } }).start());
    const procs = await Promise.all([c.startApi({ WEB_CONCURRENCY: '2' }), c.startWorker(), c.startWorker()]);
    const [api] = procs;
    const l = (scope.ledger = new Ledger('crr'));
    // Records, and responses that update the same (record, annotator) pairs again and again, before, during and after the kill.
    const run = l.load({ targets: () => [api!.url], total: 3_000, concurrency: 24, responseShare: 0.4, updateShare: 0.8, ratePerSecond: 100 });
    await until(() => (l.acked >= 300 ? true : undefined), 60_000, '300 acknowledged writes', 5);
    const nodes = c.redisNodes!;
    const victim = await nodes.masterOf(await nodes.slotOf(c.queues().shards[0]!.shard.slotKey));
    await victim.kill();
    const killedAt = Date.now();
    await nodes.waitHealthy(30_000);
    const promotedAt = Date.now();
    // The killed node comes back (as a supervisor would restart it) and rejoins as a replica: the
    // promoted master has a replica again, WAIT 1 is met, and its shards are used again.
    await victim.start();
    await nodes.waitHealthy(30_000);
    await run.done;
    await drained(c, 300_000);
    const r = await l.verify(c.db());
    const fromKill = l.entries.filter((e) => e.startedAt >= killedAt);
    const ok = (list: typeof l.entries) => list.filter((e) => e.status === 200).length / Math.max(1, list.length);
    const metrics = await (await fetch(`${api!.url}/metrics`)).text();
    const rerouted = [...metrics.matchAll(/^feedback_api_writes_rerouted_total\{[^}]*\} (\d+)/gm)].reduce((sum, m) => sum + Number(m[1]), 0);
    const figures = {
      shard_reroute: reroute,
      failover_seconds: Math.round((promotedAt - killedAt) / 100) / 10,
      requests_from_kill: fromKill.length,
      answered_200_share: Math.round(ok(l.entries) * 10_000) / 10_000,
      answered_200_share_from_kill: Math.round(ok(fromKill) * 10_000) / 10_000,
      answers_503_from_kill: fromKill.filter((e) => e.status === 503).length,
      rerouted_by_one_api_process: rerouted,
    };
    recordScenario(this.test!.fullTitle(), ledgerFigures('Redis Cluster master SIGKILL, SHARD_REROUTE, REDIS_MIN_REPLICAS_ACK=1, WEB_CONCURRENCY=2', r, figures));
    saveLossFigure(`reroute-${reroute}`, { ...figures, requests: r.requests, acknowledged: r.acknowledged });

    assertAnswered(l.entries, procs);
    assert.ok(ok(l.entries) >= 0.99 && ok(fromKill) >= 0.99, `answered 200: ${JSON.stringify(figures)}`);
    assertBalanced(r);
    assert.deepEqual(await c.deadLetters(), []);
    assert.equal(await c.failedJobs(), 0);
    assert.ok(procs.every((p) => p.alive()), 'a process died');
    assertNoUnhandled(procs);
  });

  it('kill -9 of a master mid-burst without REDIS_MIN_REPLICAS_ACK: what asynchronous replication loses (figure saved), nothing duplicated, order kept', async function () {
    // A response to a lost record waits for it, then is dead-lettered: few, quick attempts.
    const c = (scope.cluster = await new Cluster({ label: 'cluster-failover-async', redisCluster: true, env: { JOB_ATTEMPTS: '3', JOB_BACKOFF_MS: '200' } }).start());
    const l = (scope.ledger = new Ledger('cfa'));
    const { r, lost } = await masterKilledMidBurst(c, l, this.test!.fullTitle(), 0);
    // Losing acknowledged writes is what this setting allows, and with a lost record its later
    // responses (dead-lettered as record_not_stored); anything else is a bug.
    const stored = new Set((await c.db().collection<{ _id: string }>('feedback_records').find({}, { projection: { _id: 1 } }).toArray()).map((d) => d._id));
    const letters = await c.deadLetters();
    assert.deepEqual(letters.filter((d) => d['reason'] !== 'record_not_stored' || stored.has(String(d['record_id']))).map((d) => `${String(d._id)}: ${String(d['reason'])}`), [], 'dead letters other than responses to lost records');
    assert.deepEqual(r.problems.filter((p) => !LOSS.test(p) && !/unexpected dead letter/.test(p)), [], 'problems other than lost writes');
    assert.ok(lost <= r.acknowledged);
    assertNoDuplicateOrStray(r);
  });
});
