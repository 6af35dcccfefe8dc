import assert from 'node:assert/strict';
import { request } from 'node:http';
import { COLLECTIONS } from '../../shared/mongo.js';
import { orderNode } from '../../shared/order-clock.js';
import { Cluster, until } from './cluster.js';
import { answerOf, NoAnswer, type HttpAnswer } from './http.js';
import { assertBalanced, Ledger } from './ledger.js';
import { faultScope } from './scope.js';
import { msg, type ServiceProcess } from '../../devkit/processes.js';
import { ledgerFigures, recordScenario } from './report.js';

/**
 * WEB_CONCURRENCY=2: the real `web` entry point as a node:cluster primary with two API processes
 * on one port, the real worker, a durable Redis and FerretDB. What the primary's processes did is
 * read from their log lines (each carries its pid): no debug hook in the service.
 */

const SHUTDOWN_TIMEOUT_MS = 8_000;

interface Listening {
  readonly pid: number;
  readonly node: number;
}

/** The API processes that logged "api listening" (not the primary), in order. */
function listening(api: ServiceProcess): Listening[] {
  return api.lines.filter(msg('api listening')).map((l) => ({ pid: Number(l.json?.['pid']), node: Number(l.json?.['order_node']) }));
}

/** Pids of the processes that answered a write (their request log lines). */
function writePids(api: ServiceProcess, since = 0): Set<number> {
  return new Set(api.lines.slice(since).filter((l) => l.json?.['msg'] === 'request' && l.json['status'] === 200 && String(l.json['path']).startsWith('/feedback-')).map((l) => Number(l.json?.['pid'])));
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function drained(c: Cluster): Promise<void> {
  await until(async () => ((await c.pendingJobs()) === 0 ? true : undefined), 60_000, 'the queue to drain', 250);
}

/**
 * A POST sent with `Expect: 100-continue`: `admitted` resolves when the server answered
 * "100 Continue", i.e. an API process parsed the headers and runs the request, which then waits
 * for its body until `finish()`.
 */
function heldRequest(port: number, path: string, headers: Record<string, string>, body: string): { admitted: Promise<void>; finish(): void; answer: Promise<HttpAnswer | NoAnswer> } {
  const buf = Buffer.from(body);
  const req = request({ host: '127.0.0.1', port, method: 'POST', path, agent: false, headers: { ...headers, 'Content-Length': String(buf.length), Expect: '100-continue' } });
  const admitted = new Promise<void>((resolve) => req.once('continue', () => resolve()));
  const answer = answerOf(req);
  req.flushHeaders();
  return { admitted, finish: () => req.end(buf), answer };
}

describe('WEB_CONCURRENCY: API processes of one host (node:cluster, real processes)', function () {
  const scope = faultScope();

  it('two processes serve one port with their own order nodes, every write is stored once, and a killed process is replaced on its node', async function () {
    const c = (scope.cluster = await new Cluster({ label: 'web-concurrency' }).start());
    const [api] = await Promise.all([c.startApi({ WEB_CONCURRENCY: '2' }), c.startWorker()]);
    await api.waitForLog(msg('api cluster listening'), 60_000, 'api cluster listening');
    // The processes write their lines asynchronously: the primary may log before they do.
    const first = await until(() => (listening(api).length >= 2 ? listening(api) : undefined), 10_000, 'two "api listening" lines');
    assert.equal(first.length, 2, 'two API processes listen');
    assert.equal(new Set(first.map((p) => p.pid)).size, 2);
    assert.ok(!first.some((p) => p.pid === api.pid), 'the primary serves nothing itself');
    assert.equal(new Set(first.map((p) => p.node)).size, 2, `the processes share an order node: ${JSON.stringify(first)}`);

    const l = (scope.ledger = new Ledger('webc'));
    await l.load({ targets: () => [api.url], total: 300, concurrency: 8, responseShare: 0.4 }).done;
    assert.deepEqual([...writePids(api)].sort(), first.map((p) => p.pid).sort(), 'both processes answered writes');

    // kill -9 of one process: the primary starts another on the same order node.
    const victim = first[0]!;
    const linesBefore = api.lines.length;
    process.kill(victim.pid, 'SIGKILL');
    await api.waitForLog((line) => msg('api process died; starting another')(line) && line.json?.['order_node'] === victim.node, 15_000, 'api process died');
    const replacement = await until(() => listening(api).find((p) => p.node === victim.node && p.pid !== victim.pid), 60_000, 'a replacement listening');
    assert.ok(!alive(victim.pid));
    await l.load({ targets: () => [api.url], total: 200, concurrency: 8, responseShare: 0.4 }).done;
    assert.ok(writePids(api, linesBefore).has(replacement.pid), 'the replacement answers writes');

    await drained(c);
    const r = await l.verify(c.db());
    recordScenario(this.test!.fullTitle(), ledgerFigures('WEB_CONCURRENCY=2, kill -9 of one API process between two loads', r, { processes: 2, replaced_pid: victim.pid }));
    assertBalanced(r);
    assert.equal(r.outcomes.acked, r.requests, 'between the loads no request may be refused');

    // Every stored version carries the node of the process that accepted it: only the two nodes.
    const seqs = (await c.db().collection(COLLECTIONS.responses).find({}, { projection: { seq: 1 } }).toArray()).map((d) => Number(d['seq']));
    assert.ok(seqs.length > 0);
    assert.deepEqual([...new Set(seqs.map(orderNode))].sort((a, b) => a - b), first.map((p) => p.node).sort((a, b) => a - b));
  });

  it('SIGTERM to the primary: every process answers its in-flight requests, flushes its writes and exits; then the primary exits 0', async function () {
    const c = (scope.cluster = await new Cluster({ label: 'web-concurrency-sigterm', env: { SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_TIMEOUT_MS) } }).start());
    const [api] = await Promise.all([c.startApi({ WEB_CONCURRENCY: '2' }), c.startWorker()]);
    await api.waitForLog(msg('api cluster listening'), 60_000, 'api cluster listening');
    const procs = await until(() => (listening(api).length >= 2 ? listening(api) : undefined), 10_000, 'two "api listening" lines');
    const l = (scope.ledger = new Ledger('webc-term'));
    await l.load({ targets: () => [api.url], total: 20, concurrency: 2 }).done;

    // Four requests in flight: their headers are in, their bodies not yet. node:cluster hands
    // connections to the processes in turn, so both processes hold some.
    const held = Array.from({ length: 4 }, () => {
      const prepared = l.prepare(api.url);
      return { prepared, req: heldRequest(api.port, prepared.path, prepared.headers, prepared.body) };
    });
    await Promise.all(held.map((h) => h.req.admitted));
    const termAt = Date.now();
    api.signal('SIGTERM');
    for (const p of procs) {
      await api.waitForLog((line) => msg('shutting down')(line) && Number(line.json?.['pid']) === p.pid, 10_000, `process ${p.pid} shutting down`);
    }
    for (const h of held) h.req.finish();
    const answers = await Promise.all(held.map((h) => h.req.answer));
    held.forEach((h, i) => l.settle(h.prepared.entry, answers[i]!));
    const exit = await api.exited;

    await drained(c);
    const r = await l.verify(c.db());
    recordScenario(this.test!.fullTitle(), ledgerFigures('WEB_CONCURRENCY=2, SIGTERM to the primary with requests in flight', r, { processes: 2, in_flight_at_sigterm: held.length, exit_ms: exit.at - termAt }));
    for (const a of answers) {
      assert.ok(!(a instanceof NoAnswer), `a request in flight at SIGTERM got no answer: ${a instanceof NoAnswer ? a.message : ''}`);
      assert.equal(a.status, 200, `a request in flight at SIGTERM got ${a.status} ${a.text}`);
    }
    assert.equal(exit.code, 0, 'the primary did not exit cleanly');
    assert.equal(api.lines.filter(msg('shut down cleanly')).length, 3, 'two processes and the primary shut down cleanly');
    for (const p of procs) assert.ok(!alive(p.pid), `process ${p.pid} outlived the primary`);
    assert.ok(!api.lines.some(msg('api process died; starting another')), 'a process stopped on purpose was replaced');
    assertBalanced(r);
    assert.equal(r.outcomes.acked, r.requests);
  });
});
