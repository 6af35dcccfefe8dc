import { performance } from 'node:perf_hooks';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export interface ApiMetrics {
  readonly registry: Registry;
  readonly httpRequests: Counter<'route' | 'method' | 'status'>;
  readonly httpSeconds: Histogram<'route' | 'method'>;
  readonly enqueueSeconds: Histogram;
  readonly batchSize: Histogram;
  readonly rejected: Counter<'code'>;
  readonly rateLimitFailOpen: Counter;
  readonly rerouted: Counter<'from_shard'>;
  readonly shardUp: Gauge<'shard'>;
  /** Seconds the event loop spent idle and active since start (performance.eventLoopUtilization), read at scrape time. */
  readonly eventLoop: Gauge<'state'>;
}

/** Queue states reported by `feedback_api_queue_jobs`: what an autoscaler of workers watches. */
const QUEUE_STATES = ['waiting', 'active', 'delayed', 'prioritized', 'failed'] as const;

/** Job counts of the write queue by state, as BullMQ's `queue.getJobCounts` returns them. */
type QueueJobCounts = (...states: (typeof QUEUE_STATES)[number][]) => Promise<Record<string, number>>;

/**
 * A registry of its own per app, so tests and several apps in one process never collide.
 * With `queueJobCounts`, `feedback_api_queue_jobs{state}` is read from Redis when /metrics is
 * scraped (one round trip per scrape, none per request); when the read fails or times out the
 * last values stay, so /metrics keeps answering during an outage.
 */
export function createApiMetrics(options: { defaultMetrics: boolean; queueJobCounts?: QueueJobCounts }): ApiMetrics {
  const registry = new Registry();
  if (options.defaultMetrics) collectDefaultMetrics({ register: registry, prefix: 'feedback_api_' });
  const { queueJobCounts } = options;
  if (queueJobCounts !== undefined) {
    new Gauge({
      name: 'feedback_api_queue_jobs',
      help: 'Jobs of the write queue by state (waiting, active, delayed, prioritized, failed), read at scrape time; each job carries up to BATCH_MAX_ITEMS writes. The overloaded ceiling (BACKLOG_MAX_JOBS) compares waiting + delayed + prioritized.',
      labelNames: ['state'],
      registers: [registry],
      async collect() {
        try {
          const counts = await queueJobCounts(...QUEUE_STATES);
          for (const state of QUEUE_STATES) this.set({ state }, counts[state] ?? 0);
        } catch {
          // Redis unreachable or slow: keep the last values; /readyz and the logs say why.
        }
      },
    });
  }
  return {
    registry,
    httpRequests: new Counter({ name: 'feedback_api_http_requests_total', help: 'HTTP requests by route, method and status.', labelNames: ['route', 'method', 'status'], registers: [registry] }),
    httpSeconds: new Histogram({ name: 'feedback_api_http_request_duration_seconds', help: 'HTTP request latency.', labelNames: ['route', 'method'], buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5], registers: [registry] }),
    enqueueSeconds: new Histogram({ name: 'feedback_api_enqueue_duration_seconds', help: 'Time for Redis to acknowledge one job (a batch of writes).', buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1], registers: [registry] }),
    batchSize: new Histogram({ name: 'feedback_api_enqueue_batch_size', help: 'Writes per queued job.', buckets: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000], registers: [registry] }),
    rejected: new Counter({ name: 'feedback_api_rejected_total', help: 'Requests answered with an error, by error code.', labelNames: ['code'], registers: [registry] }),
    eventLoop: new Gauge({
      name: 'feedback_api_event_loop_seconds',
      help: 'Seconds the event loop was idle or active (running code) since the process started; the utilisation over an interval is Δactive / (Δactive + Δidle).',
      labelNames: ['state'],
      registers: [registry],
      collect() {
        const { idle, active } = performance.eventLoopUtilization();
        this.set({ state: 'idle' }, idle / 1000);
        this.set({ state: 'active' }, active / 1000);
      },
    }),
    rerouted: new Counter({ name: 'feedback_api_writes_rerouted_total', help: 'Writes sent to another shard than their record\'s because that one did not answer (SHARD_REROUTE), by the shard they left.', labelNames: ['from_shard'], registers: [registry] }),
    shardUp: new Gauge({ name: 'feedback_api_shard_up', help: 'Whether this API process sends writes to the shard (1) or routes around it while probing it (0).', labelNames: ['shard'], registers: [registry] }),
    rateLimitFailOpen: new Counter({ name: 'feedback_api_rate_limit_fail_open_total', help: 'Write requests let through unchecked because Redis did not answer the rate-limit check.', registers: [registry] }),
  };
}
