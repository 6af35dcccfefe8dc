import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export interface ApiMetrics {
  readonly registry: Registry;
  readonly httpRequests: Counter<'route' | 'method' | 'status'>;
  readonly httpSeconds: Histogram<'route' | 'method'>;
  readonly enqueueSeconds: Histogram;
  readonly batchSize: Histogram;
  readonly rejected: Counter<'code'>;
  readonly backlogJobs: Gauge;
}

/** A registry of its own per app, so tests and several apps in one process never collide. */
export function createApiMetrics(options: { defaultMetrics: boolean }): ApiMetrics {
  const registry = new Registry();
  if (options.defaultMetrics) collectDefaultMetrics({ register: registry, prefix: 'feedback_api_' });
  return {
    registry,
    httpRequests: new Counter({ name: 'feedback_api_http_requests_total', help: 'HTTP requests by route, method and status.', labelNames: ['route', 'method', 'status'], registers: [registry] }),
    httpSeconds: new Histogram({ name: 'feedback_api_http_request_duration_seconds', help: 'HTTP request latency.', labelNames: ['route', 'method'], buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5], registers: [registry] }),
    enqueueSeconds: new Histogram({ name: 'feedback_api_enqueue_duration_seconds', help: 'Time for Redis to acknowledge one job (a batch of writes).', buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1], registers: [registry] }),
    batchSize: new Histogram({ name: 'feedback_api_enqueue_batch_size', help: 'Writes per queued job.', buckets: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000], registers: [registry] }),
    rejected: new Counter({ name: 'feedback_api_rejected_total', help: 'Requests answered with an error, by error code.', labelNames: ['code'], registers: [registry] }),
    backlogJobs: new Gauge({ name: 'feedback_api_backlog_jobs', help: 'Waiting + delayed jobs at the last poll.', registers: [registry] }),
  };
}
