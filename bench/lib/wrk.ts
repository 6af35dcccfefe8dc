// Load from wrk (C, one thread): it spends a fraction of what autocannon does per request, so the
// server under test keeps the cores. The requests of a mix are written once into a Lua script that
// hands them out in turn; wrk's summary (counts, latency percentiles) comes back as one JSON line
// printed by the script's done(). Bursts of a fixed number of requests still use autocannon
// (wrk runs for a duration only).
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { LoadResult, LoadRun } from './load.js';
import { registerTempDir } from './procs.js';

export interface WrkRequest {
  readonly path: string;
  readonly body: string;
}

interface WrkSpec {
  readonly url: string;
  readonly connections: number;
  readonly headers: Readonly<Record<string, string>>;
  /** Handed out in turn, across connections. */
  readonly requests: readonly WrkRequest[];
  readonly durationS: number;
  readonly threads?: number;
  readonly timeoutS?: number;
}

const luaString = (s: string) => `"${s.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n').replace(/\r/g, '\\r')}"`;

function script(spec: WrkSpec): string {
  const headers = Object.entries(spec.headers).map(([k, v]) => `[${luaString(k)}] = ${luaString(v)}`).join(', ');
  const list = spec.requests.map((r) => `{${luaString(r.path)}, ${luaString(r.body)}}`).join(',\n');
  return `local specs = {\n${list}\n}
local headers = { ${headers} }
local reqs = {}
local i = 0
function init(args)
  for k, s in ipairs(specs) do reqs[k] = wrk.format("POST", s[1], headers, s[2]) end
end
function request()
  i = i % #reqs + 1
  return reqs[i]
end
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('WRK_JSON {"requests":%d,"duration_us":%d,"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d,"p50":%d,"p90":%d,"p99":%d,"max":%d,"mean":%f}\\n',
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean))
end
`;
}

/** True when wrk is on the PATH (scripts/bench.sh installs it). */
export function hasWrk(): Promise<boolean> {
  return new Promise((resolve) => {
    const child = spawn('wrk', ['--version'], { stdio: 'ignore' });
    child.once('error', () => resolve(false));
    child.once('exit', () => resolve(true));
  });
}

/** One wrk run; `done` resolves after wrk has exited (and been reaped, so its CPU shows in the parent's cutime). */
export function runWrk(spec: WrkSpec): LoadRun {
  const dir = mkdtempSync(join(tmpdir(), 'bench-wrk-'));
  registerTempDir(dir);
  const file = join(dir, 'mix.lua');
  writeFileSync(file, script(spec));
  const args = ['-t', String(spec.threads ?? 1), '-c', String(spec.connections), '-d', `${spec.durationS}s`, '--timeout', `${spec.timeoutS ?? 10}s`, '-s', file, spec.url];
  const child = spawn('wrk', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (s: string) => (out += s));
  child.stderr.setEncoding('utf8').on('data', (s: string) => (out += s));
  const done = new Promise<LoadResult>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) => {
      const line = /WRK_JSON (\{.*\})/.exec(out);
      if (code !== 0 || line === null) {
        reject(new Error(`wrk exited with ${code ?? 'a signal'}: ${out.slice(-500)}`));
        return;
      }
      const j = JSON.parse(line[1]!) as Record<string, number>;
      const n = (k: string) => j[k] ?? 0;
      const durationS = n('duration_us') / 1e6;
      const non2xx = n('status');
      const ok = n('requests') - non2xx;
      resolve({
        durationS,
        ok,
        non2xx,
        statusCodes: { '2xx': ok, ...(non2xx > 0 ? { 'non-2xx': non2xx } : {}) },
        errors: n('connect') + n('read') + n('write'),
        timeouts: n('timeout'),
        rps: durationS > 0 ? ok / durationS : 0,
        latencyMs: { p50: n('p50') / 1000, p90: n('p90') / 1000, p99: n('p99') / 1000, max: n('max') / 1000, mean: n('mean') / 1000 },
      });
    });
  });
  return { done, ok: () => Number.NaN, stop: () => child.kill('SIGINT') };
}
