/** The designs compared; `project_live` is this project with its worker draining during the load. */
export const DESIGNS = ['raw_http', 'textbook', 'ceiling', 'direct', 'project', 'project_b', 'project_live', 'project_webhook'] as const;
export type Design = (typeof DESIGNS)[number];

/** Designs whose worker drains during the load, on the same cores as the API. */
export const LIVE_DESIGNS: ReadonlySet<Design> = new Set(['project_live', 'project_webhook']);

export const DESIGN_LABELS: Readonly<Record<Design, string>> = {
  raw_http: '(r) raw node:http: read, auth, JSON.parse, shape check, 200 (bench/peers/raw-http.ts)',
  textbook: '(b) textbook peer: Koa + @koa/router + koa-bodyparser, one queue.add per request (bench/peers/textbook.ts)',
  ceiling: '(a) this app answering without enqueueing',
  direct: '(c) direct: one MongoDB write per request, no queue',
  project: '(d) this project: API, worker paused',
  project_b: "(d') this project with the --ab settings (or the --ab-dist build), no worker",
  project_live: '(d) this project: API + worker draining',
  project_webhook: '(d) this project: API + worker draining, one webhook endpoint subscribed to every event (a local receiver answering 200)',
};

export const DESIGN_SHORT: Readonly<Record<Design, string>> = {
  raw_http: '(r) raw node:http',
  textbook: '(b) textbook peer',
  ceiling: '(a) app, no enqueue',
  direct: '(c) direct',
  project: '(d) project',
  project_b: "(d') project --ab",
  project_live: '(d) project+worker',
  project_webhook: '(d) project+worker+webhook',
};

/** CPU spent per accepted request, µs, by process role. */
export type CpuPerRequest = Record<string, number>;

export interface RunSummary {
  readonly design: Design;
  readonly round: number;
  readonly durationS: number;
  /** 2xx seen by the load generator. */
  readonly ok: number;
  /** 200s counted by the server (includes answers the load generator cut off at the end). */
  readonly serverOk: number;
  readonly rps: number;
  readonly non2xx: number;
  readonly statusCodes: Record<string, number>;
  readonly errors: number;
  readonly timeouts: number;
  readonly latencyMs: { readonly p50: number; readonly p90: number; readonly p99: number; readonly max: number; readonly mean: number };
  readonly cpuUsPerRequest: CpuPerRequest;
  /** Event-loop utilisation of the server under test over the run (performance.eventLoopUtilization), 0-1. */
  readonly elu: number;
  /** The load generator's CPU (the benchmark process and wrk) as a share of the whole machine's, %. */
  readonly loadgenCpuPct: number;
  /** Share of the machine's CPU used by processes that are not the benchmark's, %. */
  readonly foreignCpuPct: number;
  /** Cores the server under test used on average over the run (all its processes). */
  readonly serverCores: number;
  /** Share of the run's wall time the server's main thread was runnable but waited for a CPU (/proc/<pid>/schedstat), %. */
  readonly serverWaitPct: number;
  /** Busy share of the whole machine over the run, %. */
  readonly machineBusyPct: number;
  /** The server waited for a CPU longer than the starvation bound (`--starved-wait-pct`): its round is left out of the medians. */
  readonly starved: boolean;
  /** Redis's own time per write by command over the run (INFO commandstats), µs, largest first. */
  readonly redisCommandsUsPerWrite?: Record<string, number>;
}

export interface RedisMemory {
  /** used_memory growth while the writes waited in the queue, bytes. */
  readonly deltaBytes: number;
  readonly writes: number;
  readonly jobs: number;
  readonly bytesPerWrite: number;
  readonly bytesPerJob: number;
  /** Mean request body of the mix, bytes. */
  readonly payloadBytes: number;
  /** Mean JSON size of one write inside the job data, bytes. */
  readonly jobJsonBytesPerWrite: number;
  /** used_memory after the drain (BullMQ keeps completed jobs, with their data, up to KEEP_COMPLETED_JOBS). */
  readonly usedAfterDrainBytes?: number;
}

interface DrainSummary {
  /** False when the worker had not finished within the drain budget (the rest was thrown away). */
  readonly drained: boolean;
  readonly expected: number;
  readonly writes: number;
  readonly seconds: number;
  readonly rate: number;
  readonly meanJobSize: number;
  /** Mean time of one job's MongoDB writes, ms (feedback_worker_write_duration_seconds). */
  readonly meanJobWriteMs: number;
  readonly cpuUsPerWrite: CpuPerRequest;
}

export interface LiveSummary {
  /** False when the backlog was not stored within the drain budget (lag then covers stored writes only). */
  readonly drained: boolean;
  /** Writes the worker stored per second while the load ran. */
  readonly storeRateDuringLoad: number;
  /** Accepted but not yet stored when the load stopped. */
  readonly backlogAtEndWrites: number;
  readonly peakBacklogWrites: number;
  /** From the end of the load until every accepted write was stored, s. */
  readonly drainTailS: number;
  readonly lagP50Ms: number | undefined;
  readonly lagP99Ms: number | undefined;
  readonly lagCount: number;
}

export interface RawSummary {
  readonly rate: number;
  readonly writes: number;
  readonly seconds: number;
  readonly batch: number;
  readonly concurrency: number;
}

export interface Round {
  readonly round: number;
  readonly order: Design[];
  readonly runs: Partial<Record<Design, RunSummary>>;
  projectRedis?: RedisMemory;
  textbookRedis?: RedisMemory;
  drain?: DrainSummary;
  raw?: RawSummary;
  live?: LiveSummary;
  /** The same as `live`, for design project_webhook. */
  liveWebhook?: LiveSummary & { readonly eventsReceived: number };
  storeProbe?: StoreProbe;
  ratios: Record<string, number | undefined>;
  /** Designs starved in this round (see RunSummary.starved); a round with any is left out of every median. */
  starved?: Design[];
}

/** One read with the worker's response filter against the project's collection, to show whether it scans. */
export interface StoreProbe {
  readonly responses: number;
  /** findOne({_id}) on feedback_responses, ms. */
  readonly idOnlyMs: number;
  /** findOne({_id, seq: {$lt}}), the filter of the worker's conditional upsert, ms. */
  readonly workerFilterMs: number;
}

export interface BurstResult {
  readonly size: number;
  /** Whether every accepted write was stored within the drain budget. */
  readonly drained: boolean;
  /** Writes the worker finished (its metrics) by the end. */
  readonly workerFinished: number;
  readonly connections: number;
  readonly accepted: number;
  readonly serverAccepted: number;
  readonly non2xx: number;
  readonly statusCodes: Record<string, number>;
  readonly errors: number;
  readonly storedRecords: number;
  readonly storedResponses: number;
  readonly deadLetters: number;
  readonly exactlyOnce: boolean;
  /** Burst start until the last answer, s. */
  readonly acceptS: number;
  /** Burst start until every accepted write was stored, s. */
  readonly drainS: number;
  /** Last answer until every accepted write was stored, s. */
  readonly tailS: number;
  readonly acceptRps: number;
  readonly p99Ms: number;
  readonly maxMs: number;
  readonly peakBacklogWrites: number;
  readonly peakBacklogJobs: number;
  readonly apiRssKb: { readonly before: number; readonly peak: number; readonly after: number };
  readonly workerRssKb: { readonly before: number; readonly peak: number; readonly after: number };
  readonly redisUsedPeakBytes: number;
}

/** The sustained scenario: a fixed request rate for a while with the worker live. */
export interface SustainedResult {
  /** Seconds asked for (--sustained). */
  readonly seconds: number;
  /** Seconds the load generator ran. */
  readonly durationS: number;
  /** What the rate is half of: `accept`, the project's max accept rate in this run (median accepted req/s of its accept rounds, worker paused); `store`, the median rate at which its worker alone drained those rounds. */
  readonly basisOf: 'accept' | 'store';
  /** That rate, req/s (writes/s for `store`). */
  readonly maxAcceptRps: number;
  /** Half of it: the rate asked of autocannon (`overallRate`). */
  readonly targetRps: number;
  readonly connections: number;
  /** Answers of any status plus errors, per second: what the server was actually offered. */
  readonly offeredRps: number;
  /** 2xx per second. */
  readonly acceptedRps: number;
  readonly accepted: number;
  /** 200s counted by the API over the window. */
  readonly serverAccepted: number;
  readonly non2xx: number;
  readonly statusCodes: Record<string, number>;
  readonly errors: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  /** Unfinished jobs (wait, active, delayed, prioritized, waiting-children), one sample a second from the start of the load, and one when it stops. */
  readonly backlogJobs: readonly number[];
  /** Accepted but not yet finished writes (autocannon's 2xx so far minus the worker's finished writes), at the same instants. */
  readonly backlogWrites: readonly number[];
  readonly backlogStart: number;
  readonly backlogMax: number;
  readonly backlogEnd: number;
  readonly firstThirdMax: number;
  readonly lastThirdMax: number;
  /** lastThirdMax <= factor × firstThirdMax + slack. */
  readonly bounded: boolean;
  readonly boundFactor: number;
  readonly boundSlackJobs: number;
  /** Writes the worker finished per second over the window. */
  readonly storeRate: number;
  /** End-to-end lag of writes stored during the window (feedback_worker_lag_seconds, difference of two scrapes). */
  readonly lagP50Ms: number | undefined;
  readonly lagP99Ms: number | undefined;
  readonly lagCount: number;
  /** Whether the backlog left at the end was stored within --drain seconds, and how long that took. */
  readonly drained: boolean;
  readonly drainTailS: number;
  /** bounded, and at least {@link SustainedResult.minAcceptShare} of the target rate accepted. */
  readonly met: boolean;
  readonly minAcceptShare: number;
}

/** One run of the scale scenario: accept with `processes` API processes, or drain with as many workers. */
export interface ScaleRun {
  readonly kind: 'accept' | 'drain';
  readonly processes: 1 | 2;
  readonly round: number;
  /** Accepted writes (accept), or the writes drained (drain: those the accept run before queued). */
  readonly count: number;
  readonly seconds: number;
  /** req/s accepted, or writes/s stored; NaN when the drain ran out of time. */
  readonly rate: number;
  readonly p99Ms?: number;
  readonly non2xx?: number;
  readonly jobs?: number;
  readonly drained?: boolean;
  /** Busy share of the whole machine (all cores) over the run, %. */
  readonly machineBusyPct: number;
  /** CPU of each role over the run as a share of the whole machine, %: api, workers, loadgen, redis, store. */
  readonly cpuPct: Record<string, number>;
}

/** The scale scenario: 2 API processes against 1, 2 worker processes against 1, same run. */
export interface ScaleResult {
  readonly seconds: number;
  readonly rounds: number;
  readonly cpus: number;
  readonly loadavgStart: readonly number[];
  readonly loadavgEnd: readonly number[];
  readonly runs: readonly ScaleRun[];
  readonly acceptRatioPerRound: readonly (number | undefined)[];
  readonly drainRatioPerRound: readonly (number | undefined)[];
  readonly acceptRatio: number | undefined;
  readonly drainRatio: number | undefined;
}

export interface Target {
  readonly name: string;
  readonly value: string;
  readonly target: string;
  readonly met: boolean | undefined;
}

export interface RatioSummary {
  readonly key: string;
  readonly label: string;
  readonly perRound: (number | undefined)[];
  readonly median: number | undefined;
  /** `>=` or `<=` with the bound, when this ratio is one of the targets. */
  readonly target?: { readonly op: '>=' | '<='; readonly bound: number };
}

export interface DesignMedians {
  readonly rps: number | undefined;
  readonly rpsMin: number | undefined;
  readonly rpsMax: number | undefined;
  readonly p50: number | undefined;
  readonly p99: number | undefined;
  readonly p99Min: number | undefined;
  readonly p99Max: number | undefined;
  readonly max: number | undefined;
  readonly non2xx: number;
  readonly cpuUsPerRequest: CpuPerRequest;
  readonly elu: number | undefined;
}

export interface BenchResult {
  readonly startedAt: string;
  readonly finishedAt: string;
  readonly wallSeconds: number;
  readonly command: string;
  readonly machine: Record<string, string | number>;
  readonly options: Record<string, unknown>;
  /** Environment given to the project's web and worker processes beyond the bench's plumbing. */
  readonly projectEnv: Record<string, string>;
  readonly mix: { readonly recordBodyBytes: number; readonly responseBodyBytes: number; readonly meanBodyBytes: number; readonly recordShare: number; readonly connections: number };
  readonly rounds: Round[];
  readonly bursts: BurstResult[];
  /** Absent when skipped (--sustained 0, or no accept round of design project to take the rate from). */
  readonly sustained?: SustainedResult;
  /** Why the sustained scenario did not run, when --sustained was above 0. */
  readonly sustainedSkipped?: string;
  /** Absent when skipped (--scale 0). */
  readonly scale?: ScaleResult;
  readonly medians: Partial<Record<Design, DesignMedians>>;
  /** Rounds the medians are taken over: those in which no design was starved (all rounds when none was clean). */
  readonly cleanRounds: number[];
  readonly ratios: RatioSummary[];
  readonly targets: Target[];
  readonly notes: string[];
}
