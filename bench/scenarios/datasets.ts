// Datasets (issue 14): the accept rate of the real API with a realistic definition (8 fields, 6
// questions of mixed types, a completion rule: issue 25's accept side) against the same round on
// a dataset without a definition, in the
// same run and the same API process; the cost of one check on the hot path; and the memory the
// API holds per 1,000 defined datasets. The API runs without a worker (writes wait in Redis), as
// the accept rounds of `npm run bench` measure the API alone.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { cpus, loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { randomBytes } from 'node:crypto';
import { createDatasetStore } from '../../api/dataset-store.js';
import { compileDataset } from '../../api/dataset-validators.js';
import type { DatasetAdmin } from '../../shared/dataset-admin.js';
import * as v from 'valibot';
import { DatasetDefinitionInput, type DatasetDefinition } from '../../shared/dataset-definition.js';
import { createIdMinter } from '../../shared/ids.js';
import { createLogger } from '../../shared/logger.js';
import { runLoad, type LoadResult } from '../lib/load.js';
import { cpuSeconds, spawnProc, stopAll } from '../lib/procs.js';
import { fmt } from '../lib/report.js';
import { freePort, startFerretDbServer, startRedisServer, waitForPort } from '../lib/services.js';
import { hasWrk, runWrk, type WrkRequest } from '../lib/wrk.js';
import { progress, ROOT, sleep } from '../lib/runner.js';

const DEFINED = 'ds_support_bot';
/** Same length as {@link DEFINED}: the two rounds send bodies of the same bytes. */
const UNDEFINED = 'ds_support_box';
const EXAMPLE = JSON.parse(readFileSync(join(ROOT, 'docs/datasets/ds_support_bot.json'), 'utf8')) as Record<string, unknown>;

/** The example as the store holds it: parsed (defaults filled in), a fresh copy each time. */
function exampleDefinition(id: string, at = new Date().toISOString()): DatasetDefinition {
  return { ...v.parse(DatasetDefinitionInput, EXAMPLE), id, created_at: at, updated_at: at };
}

function recordBody(datasetId: string, n: number): string {
  return JSON.stringify({
    record: {
      feedback_dataset_id: datasetId,
      field_to_value: {
        prompt: `How do I reset my password? (case ${n})`, answer: 'Open Settings, then Security, choose Reset password and follow the link we email you; it works for one hour.',
        alternative: 'Ask an administrator to reset it for you.', conversation: [{ role: 'user', content: 'I cannot sign in' }, { role: 'assistant', content: 'Let me help.' }],
        retrieved: { docs: ['kb-12', 'kb-40'], score: 0.82 }, latency_ms: 700 + (n % 300), cached: n % 2 === 0, model: 'gpt-x',
      },
      external_id: `conv-${n}:turn-1`,
    },
    response: { values: { rating: (n % 5) + 1, helpful: n % 3 === 0 ? 'no' : 'yes', topics: ['account'], preference: ['answer', 'alternative'], confidence: 0.75 }, status: 'submitted', user_id: `end-user-${n}` },
  });
}

function responseBody(recordId: string, n: number): string {
  const submitted = n % 3 !== 0;
  return JSON.stringify({
    feedback_record_id: recordId,
    response: submitted
      ? { status: 'submitted', values: { rating: (n % 5) + 1, helpful: 'yes', preference: ['alternative', 'answer'], correction: 'clear and correct' }, user_id: `annotator-${n % 7}` }
      : { status: 'draft', values: { rating: 3 }, user_id: `annotator-${n % 7}` },
  });
}

/** 70 records and 30 responses per 100 requests; the responses go to records minted by a warm-up. */
async function mix(url: string, auth: Record<string, string>, datasetId: string): Promise<WrkRequest[]> {
  const ids: string[] = [];
  for (let i = 0; i < 30; i++) {
    const res = await fetch(`${url}/feedback-record`, { method: 'POST', headers: auth, body: recordBody(datasetId, 1_000_000 + i) });
    if (res.status !== 200) throw new Error(`warm-up record: ${res.status} ${await res.text()}`);
    ids.push(((await res.json()) as { feedback_record_id: string }).feedback_record_id);
  }
  const out: WrkRequest[] = [];
  for (let i = 0; i < 100; i++) out.push(i % 10 < 7 ? { path: '/feedback-record', body: recordBody(datasetId, i) } : { path: '/feedback-response', body: responseBody(ids[i % ids.length]!, i) });
  return out;
}

/** Time of one check of the mix's bodies by the compiled validators, µs (in this process, no HTTP). */
function checkCost(): { recordUs: number; responseUs: number; lookupUs: number } {
  const compiled = compileDataset(exampleDefinition(DEFINED));
  const record = JSON.parse(recordBody(DEFINED, 1)) as { record: { field_to_value: Record<string, unknown> }; response: { values: Record<string, unknown> } };
  const response = JSON.parse(responseBody('x', 1)) as { response: { values: Record<string, unknown> } };
  const ids = createIdMinter(['bench-secret-0123456789abcdef']);
  const recordId = ids.newRecordId(DEFINED);
  const index = new Map([[ids.datasetFingerprints(DEFINED)[0]!, [compiled]]]);
  const time = (n: number, f: () => unknown) => {
    for (let i = 0; i < 2_000; i++) f();
    const t = performance.now();
    for (let i = 0; i < n; i++) f();
    return ((performance.now() - t) * 1000) / n;
  };
  const problems = compiled.checkRecord(record.record.field_to_value).length + compiled.checkResponse(record.response.values, 'submitted').length;
  if (problems > 0) throw new Error('the bench record does not pass its definition');
  return {
    recordUs: time(50_000, () => (compiled.checkRecord(record.record.field_to_value), compiled.checkResponse(record.response.values, 'submitted'))),
    responseUs: time(50_000, () => compiled.checkResponse(response.response.values, 'submitted')),
    lookupUs: time(50_000, () => index.get(ids.recordFingerprint(recordId)!)),
  };
}

/**
 * Heap held by the store per 1,000 definitions like the example: `held`, loaded and indexed (the
 * validators are built on first use); `checked`, once every one has checked a record and both
 * kinds of response (all validators built).
 */
async function memoryPer1000(count: number): Promise<{ held: number; checked: number }> {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc === undefined) throw new Error('run with node --expose-gc (npm run bench:datasets does)');
  const settle = async () => {
    gc();
    await sleep(50);
    gc();
    return process.memoryUsage().heapUsed;
  };
  const now = new Date().toISOString();
  const names = Array.from({ length: count }, (_, i) => `ds_${String(i).padStart(6, '0')}`);
  const admin: DatasetAdmin = {
    put: () => Promise.reject(new Error('unused')), get: () => Promise.reject(new Error('unused')), list: () => Promise.reject(new Error('unused')),
    // Built here, inside the measured span: the store keeps these objects, as it keeps what MongoDB returns.
    all: () => Promise.resolve({ definitions: names.map((id) => exampleDefinition(id, now)), invalid: [] }),
  };
  const before = await settle();
  const store = createDatasetStore({ admin, ids: createIdMinter(['bench-secret-0123456789abcdef']), refreshMs: 3_600_000, logger: createLogger({ level: 'silent', name: 'bench' }) });
  await store.refresh();
  const held = await settle();
  if (store.size !== count) throw new Error(`store holds ${store.size} of ${count}`);
  const body = JSON.parse(recordBody(DEFINED, 1)) as { record: { field_to_value: Record<string, unknown> }; response: { values: Record<string, unknown> } };
  for (const id of names) {
    const compiled = store.byId(id)!;
    compiled.checkRecord(body.record.field_to_value);
    compiled.checkResponse(body.response.values, 'submitted');
    compiled.checkResponse(body.response.values, 'draft');
  }
  const checked = await settle();
  await store.close();
  return { held: ((held - before) / count) * 1000, checked: ((checked - before) / count) * 1000 };
}

export async function runDatasetsScenario(opts: { durationS: number; rounds: number; connections: number }): Promise<void> {
  const cost = checkCost();
  progress(`check cost in-process: record + first response ${fmt(cost.recordUs, 1)} µs, response ${fmt(cost.responseUs, 1)} µs, fingerprint lookup ${fmt(cost.lookupUs, 2)} µs`);
  const memory = await memoryPer1000(1000);
  progress(`memory per 1,000 defined datasets (8 fields, 6 questions each): ${fmt(memory.held / 1024 / 1024, 2)} MiB of heap held, ${fmt(memory.checked / 1024 / 1024, 2)} MiB once each has checked writes`);

  const [redis, ferret] = await Promise.all([startRedisServer(ROOT), startFerretDbServer(ROOT)]);
  const port = await freePort();
  const key = `bench-${randomBytes(12).toString('hex')}`;
  const adminKey = `admin-${randomBytes(12).toString('hex')}`;
  const api = spawnProc('api', process.execPath, [join(ROOT, 'dist/api/main.js')], {
    cwd: ROOT,
    env: {
      PATH: process.env['PATH'] ?? '', NODE_ENV: 'production', HOST: '127.0.0.1', PORT: String(port), REDIS_URL: redis.url, MONGODB_URI: `${ferret.url}/bench_datasets`,
      API_KEYS: `bench:${key},ops:${adminKey}`, ADMIN_API_KEY_NAMES: 'ops', ID_SIGNING_SECRETS: `bench-id-secret-${randomBytes(12).toString('hex')}`,
      LOG_LEVEL: 'warn', DATASETS: 'open', QUEUE_NAME: 'bench-datasets', BACKLOG_MAX_JOBS: '100000000',
    },
    onUnexpectedExit: (p) => {
      progress(`${p.name} exited unexpectedly:\n${p.stderrTail()}`);
      process.exit(1);
    },
  });
  await waitForPort(port);
  const url = `http://127.0.0.1:${port}`;
  const put = await fetch(`${url}/datasets/${DEFINED}`, { method: 'PUT', headers: { Authorization: `Bearer ${adminKey}`, 'Content-Type': 'application/json' }, body: JSON.stringify(EXAMPLE) });
  if (put.status !== 201) throw new Error(`PUT definition: ${put.status} ${await put.text()}`);
  const headers = { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' };
  const mixes = { defined: await mix(url, headers, DEFINED), undefined: await mix(url, headers, UNDEFINED) };
  const wrk = await hasWrk();
  /** The load of one side, and the API's CPU per accepted request (µs): a shared machine moves req/s a lot, CPU per request much less. */
  const run = async (which: keyof typeof mixes): Promise<LoadResult & { cpuUs: number }> => {
    const requests = mixes[which];
    const cpu0 = cpuSeconds(api.pid);
    const load = wrk
      ? runWrk({ url, connections: opts.connections, headers, requests, durationS: opts.durationS })
      : runLoad({ url, connections: opts.connections, durationS: opts.durationS, maxS: opts.durationS + 30, requests: requests.map((r) => ({ method: 'POST', path: r.path, headers, body: r.body })) });
    const result = await load.done;
    if (result.non2xx > 0 || result.errors > 0) throw new Error(`${which}: ${result.non2xx} non-2xx, ${result.errors} errors`);
    return { ...result, cpuUs: ((cpuSeconds(api.pid) - cpu0) * 1e6) / result.ok };
  };
  const lines: string[] = [];
  for (let round = 1; round <= opts.rounds; round++) {
    // Alternate the order, so that a drift of the machine's load does not favour one side.
    const order: (keyof typeof mixes)[] = round % 2 === 1 ? ['defined', 'undefined'] : ['undefined', 'defined'];
    const results: Partial<Record<keyof typeof mixes, LoadResult & { cpuUs: number }>> = {};
    const load = loadavg()[0]!;
    for (const which of order) {
      results[which] = await run(which);
      await sleep(1_000);
    }
    const d = results.defined!;
    const u = results.undefined!;
    const line =
      `round ${round} (${order.join(' first, ')}): with definition ${fmt(d.rps)} req/s, API CPU ${fmt(d.cpuUs, 1)} µs/request (p99 ${fmt(d.latencyMs.p99, 1)} ms); ` +
      `without ${fmt(u.rps)} req/s, ${fmt(u.cpuUs, 1)} µs/request (p99 ${fmt(u.latencyMs.p99, 1)} ms): accept rate ${fmt(d.rps / u.rps, 3)}x, ` +
      `CPU-bound rate ${fmt(u.cpuUs / d.cpuUs, 3)}x; load average ${fmt(load, 2)} on ${cpus().length} cores`;
    progress(line);
    lines.push(line);
  }
  await stopAll();
  process.stdout.write(
    `## Datasets (${wrk ? 'wrk' : 'autocannon'}, ${opts.connections} connections, ${opts.durationS} s per side, 70% records / 30% responses)\n\n` +
      `${lines.map((l) => `- ${l}`).join('\n')}\n- check cost in-process: record + first response ${fmt(cost.recordUs, 1)} µs, response ${fmt(cost.responseUs, 1)} µs, fingerprint lookup ${fmt(cost.lookupUs, 2)} µs\n` +
      `- heap per 1,000 defined datasets like docs/datasets/ds_support_bot.json: ${fmt(memory.held / 1024 / 1024, 2)} MiB held, ${fmt(memory.checked / 1024 / 1024, 2)} MiB once each has checked writes\n`,
  );
}
