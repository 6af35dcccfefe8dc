// Records per second through POST /feedback-batch against single POST /feedback-record calls, in
// the same run, on the same API process, alternating rounds (so a noisy neighbour hits both).
// Both count records accepted, i.e. queued in Redis and acknowledged: what a 200/207 promises.
import type autocannon from 'autocannon';
import { recordBody, runLoad, type LoadResult } from '../lib/load.js';

export interface BatchBenchOptions {
  /** The API's base URL. */
  readonly url: string;
  readonly apiKey: string;
  readonly datasetId: string;
  /** Seconds per round of each mode. */
  readonly seconds: number;
  /** Rounds of each mode, alternating single, batch, single, batch, … */
  readonly rounds: number;
  /** Items per batch call. */
  readonly batchSize: number;
  /** Connections of the single-call load (enough to keep the API's group commit busy). */
  readonly singleConnections: number;
  /** Connections of the batch load. */
  readonly batchConnections: number;
  readonly log: (line: string) => void;
}

export interface BatchRound {
  readonly mode: 'single' | 'batch';
  readonly connections: number;
  /** Records accepted per second: 2xx calls × records per call / seconds. */
  readonly recordsPerSecond: number;
  readonly callsPerSecond: number;
  readonly non2xx: number;
  readonly errors: number;
  readonly latencyMsP50: number;
  readonly latencyMsP99: number;
}

/** Distinct bodies (each record its own text) so that nothing is flattered by repetition. */
const VARIANTS = 64;

function requests(options: BatchBenchOptions, mode: 'single' | 'batch'): autocannon.Request[] {
  const headers = { 'Content-Type': 'application/json', Authorization: `Bearer ${options.apiKey}` };
  if (mode === 'single') {
    return Array.from({ length: VARIANTS }, (_, v) => ({ method: 'POST', path: '/feedback-record', headers, body: recordBody(options.datasetId, v) }));
  }
  // A batch carries the very same record bodies as the single calls.
  const bodies = Array.from({ length: Math.max(VARIANTS, options.batchSize) }, (_, v) => recordBody(options.datasetId, v));
  return Array.from({ length: 8 }, (_, b) => ({
    method: 'POST',
    path: '/feedback-batch',
    headers,
    body: `{"items":[${Array.from({ length: options.batchSize }, (_, i) => bodies[(b * 7 + i) % bodies.length]!).join(',')}]}`,
  }));
}

function round(mode: 'single' | 'batch', connections: number, perCall: number, r: LoadResult): BatchRound {
  return {
    mode,
    connections,
    recordsPerSecond: r.rps * perCall,
    callsPerSecond: r.rps,
    non2xx: r.non2xx,
    errors: r.errors,
    latencyMsP50: r.latencyMs.p50,
    latencyMsP99: r.latencyMs.p99,
  };
}

export async function runBatchVsSingle(options: BatchBenchOptions): Promise<BatchRound[]> {
  const out: BatchRound[] = [];
  for (let i = 0; i < options.rounds; i++) {
    for (const mode of ['single', 'batch'] as const) {
      const connections = mode === 'single' ? options.singleConnections : options.batchConnections;
      const perCall = mode === 'single' ? 1 : options.batchSize;
      const run = runLoad({ url: options.url, connections, requests: requests(options, mode), durationS: options.seconds, maxS: options.seconds + 30, timeoutS: 30 });
      const result = round(mode, connections, perCall, await run.done);
      options.log(`round ${i + 1} ${mode}: ${Math.round(result.recordsPerSecond)} records/s (${result.callsPerSecond.toFixed(1)} calls/s, p50 ${result.latencyMsP50} ms, p99 ${result.latencyMsP99} ms, non-2xx ${result.non2xx}, errors ${result.errors})`);
      out.push(result);
    }
  }
  return out;
}

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}
