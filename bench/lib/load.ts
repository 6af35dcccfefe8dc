import autocannon from 'autocannon';

/** Size of the record body the measurements used. */
const RECORD_BODY_BYTES = 496;

/** Words of a support chatbot's answers; each body draws its own sequence (see {@link answerText}). */
const WORDS = (
  'open settings then security choose reset password and follow the link we email you it works for one hour ' +
  'if no mail arrives check spam folder or ask an administrator to reset account for your team billing invoice ' +
  'plan upgrade downgrade cancel refund within days card payment failed retry update address export data csv ' +
  'report dashboard filter date range timezone language notification mobile app desktop browser cache cookies ' +
  'sign in two factor code authenticator sms backup codes device trusted session expired logout everywhere api ' +
  'token scope webhook endpoint rate limit error retry later status page incident resolved contact support chat'
).split(' ');

/** Deterministic, different for each variant: compression of a job's writes is not flattered by repeats. */
function answerText(variant: number, bytes: number): string {
  let x = (variant * 2654435761 + 12345) >>> 0;
  const out: string[] = [];
  let length = 0;
  while (length < bytes) {
    x = (Math.imul(x ^ (x >>> 15), 2246822507) + 0x9e3779b9) >>> 0;
    const word = WORDS[x % WORDS.length]!;
    out.push(word);
    length += word.length + 1;
  }
  return out.join(' ').slice(0, bytes);
}

/**
 * A `/feedback-record` body of exactly {@link RECORD_BODY_BYTES} bytes (the answer text is padded),
 * shaped like the SPEC's example: record with fields, external id and metadata, plus its first
 * response. Each variant has its own answer text.
 */
export function recordBody(datasetId: string, variant: number): string {
  const make = (answer: string) =>
    JSON.stringify({
      record: {
        feedback_dataset_id: datasetId,
        field_to_value: { prompt: `How do I reset my password? (case ${variant % 1_000_000})`, answer },
        external_id: `conv-${(8800 + variant) % 10_000_000}:turn-${(variant % 7) + 1}`,
        metadata: { model: 'gpt-x', locale: 'en' },
      },
      response: { values: { helpful: variant % 2, ranking: ['answer', 'prompt'] }, status: 'submitted', user_id: `end-user-${variant % 1_000_000}` },
    });
  const base = Buffer.byteLength(make(''));
  const room = Math.max(10, RECORD_BODY_BYTES - base);
  return make(answerText(variant, room));
}

/** A `/feedback-response` body: an annotator's update of an existing record. */
function responseBody(recordId: string, annotator: number, n: number): string {
  return JSON.stringify({
    feedback_record_id: recordId,
    response: { status: n % 3 === 0 ? 'draft' : 'submitted', values: { helpful: n % 5, comment: 'clear and correct' }, user_id: `annotator-${annotator}` },
  });
}

interface MixOptions {
  readonly datasetId: string;
  readonly apiKey: string;
  /** Record ids that exist (stored or queued) for the `/feedback-response` share. */
  readonly responseTargets: readonly string[];
  /** Share of `/feedback-response` requests, 0 to 1, in steps of 0.1. */
  readonly responseShare: number;
}

export interface Mix {
  readonly requests: autocannon.Request[];
  /** The same mix as a fixed list for wrk: {@link WRK_CYCLES} cycles of 10, each body its own. */
  readonly fixed: { readonly path: string; readonly body: string }[];
  readonly headers: Readonly<Record<string, string>>;
  /** Mean body size of the mix, bytes (what one accepted write carries on the wire). */
  readonly meanBodyBytes: number;
  readonly recordBodyBytes: number;
  readonly responseBodyBytes: number;
  /** Fraction of requests that are `/feedback-record`. */
  readonly recordShare: number;
}

/**
 * A cycle of 10 requests each connection loops over: mostly `/feedback-record` (each body its
 * own variant), the rest `/feedback-response` whose body is rebuilt per request so that the
 * updates spread over many (record, annotator) pairs.
 */
/** Cycles of 10 requests in the fixed list handed to wrk (3,000 distinct bodies). */
const WRK_CYCLES = 300;

export function buildMix(options: MixOptions): Mix {
  const headers = { 'content-type': 'application/json', authorization: `Bearer ${options.apiKey}` };
  const responses = options.responseTargets.length === 0 ? 0 : Math.round(options.responseShare * 10);
  const records = 10 - responses;
  const requests: autocannon.Request[] = [];
  // Record bodies are rebuilt per request (a new variant each time), as responses are: a job's
  // writes then differ as real feedback does, and Redis-size figures are not flattered.
  const recordBodies = [recordBody(options.datasetId, 0)];
  let recordCounter = 1;
  for (let i = 0; i < records; i++) {
    requests.push({ method: 'POST', path: '/feedback-record', headers, setupRequest: (req) => ({ ...req, body: recordBody(options.datasetId, recordCounter++) }) });
  }
  let counter = 0;
  const targets = options.responseTargets;
  let sampleResponse = '';
  for (let i = 0; i < responses; i++) {
    const next = () => {
      const n = counter++;
      return responseBody(targets[n % targets.length]!, Math.floor(n / targets.length) % 8, n);
    };
    sampleResponse = responseBody(targets[0] ?? '', 0, 1);
    requests.push({ method: 'POST', path: '/feedback-response', headers, setupRequest: (req) => ({ ...req, body: next() }) });
  }
  const fixed: { path: string; body: string }[] = [];
  let fixedRecord = 1;
  let fixedResponse = 0;
  for (let cycle = 0; cycle < WRK_CYCLES; cycle++) {
    for (let i = 0; i < records; i++) fixed.push({ path: '/feedback-record', body: recordBody(options.datasetId, fixedRecord++) });
    for (let i = 0; i < responses; i++) {
      const n = fixedResponse++;
      fixed.push({ path: '/feedback-response', body: responseBody(targets[n % targets.length]!, Math.floor(n / targets.length) % 8, n) });
    }
  }
  const recordBytes = Buffer.byteLength(recordBodies[0] ?? '');
  const responseBytes = Buffer.byteLength(sampleResponse);
  return {
    requests,
    fixed,
    headers,
    meanBodyBytes: (records * recordBytes + responses * responseBytes) / 10,
    recordBodyBytes: recordBytes,
    responseBodyBytes: responseBytes,
    recordShare: records / 10,
  };
}

export interface LoadResult {
  readonly durationS: number;
  /** 2xx answers. */
  readonly ok: number;
  readonly non2xx: number;
  readonly statusCodes: Record<string, number>;
  readonly errors: number;
  readonly timeouts: number;
  /** 2xx per second. */
  readonly rps: number;
  readonly latencyMs: { readonly p50: number; readonly p90: number; readonly p99: number; readonly max: number; readonly mean: number };
}

export interface LoadRun {
  readonly done: Promise<LoadResult>;
  /** 2xx answers so far. */
  ok(): number;
  stop(): void;
}

/**
 * One autocannon run on loopback: `durationS` seconds, or `amount` requests (then bounded by
 * `maxS`, after which it is stopped and reports what it got). With `rate`, at most that many
 * requests per second over all connections (autocannon's `overallRate`: each connection sends its
 * share at the start of every second, then waits for the next); without it, as fast as answered.
 */
export function runLoad(spec: { url: string; connections: number; requests: autocannon.Request[]; durationS?: number; amount?: number; maxS: number; timeoutS?: number; rate?: number }): LoadRun {
  let ok = 0;
  let cap: NodeJS.Timeout | undefined;
  let instance: autocannon.Instance | undefined;
  const done = new Promise<LoadResult>((resolve, reject) => {
    instance = autocannon(
      {
        url: spec.url,
        connections: spec.connections,
        requests: spec.requests,
        timeout: spec.timeoutS ?? 10,
        ...(spec.rate === undefined ? {} : { overallRate: Math.max(1, Math.round(spec.rate)) }),
        ...(spec.amount === undefined ? { duration: spec.durationS ?? 10 } : { amount: spec.amount }),
      },
      (err, r) => {
        clearTimeout(cap);
        if (err) {
          reject(err);
          return;
        }
        const statusCodes: Record<string, number> = {};
        for (const [code, s] of Object.entries(r.statusCodeStats)) statusCodes[code] = s.count;
        resolve({
          durationS: r.duration,
          ok: r['2xx'],
          non2xx: r.non2xx,
          statusCodes,
          errors: r.errors,
          timeouts: r.timeouts,
          rps: r.duration > 0 ? r['2xx'] / r.duration : 0,
          latencyMs: { p50: r.latency.p50, p90: r.latency.p90, p99: r.latency.p99, max: r.latency.max, mean: r.latency.average },
        });
      },
    );
    instance.on('response', (_client: unknown, status: number) => {
      if (status >= 200 && status < 300) ok++;
    });
    cap = setTimeout(() => instance?.stop(), spec.maxS * 1000);
  });
  return { done, ok: () => ok, stop: () => instance?.stop() };
}
