import { Counter, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export interface WorkerMetrics {
  readonly registry: Registry;
  readonly jobs: Counter<'outcome'>;
  readonly writes: Counter<'outcome'>;
  readonly batchSize: Histogram;
  readonly writeSeconds: Histogram;
  readonly lagSeconds: Histogram;
  readonly storeRetries: Counter;
  readonly deadLettered: Counter<'reason'>;
  /** Shard workers replaced because they took no job while jobs waited (worker/shard-watch.ts). */
  readonly consumerRestarts: Counter<'shard'>;
}

export function createWorkerMetrics(options: { defaultMetrics: boolean }): WorkerMetrics {
  const registry = new Registry();
  if (options.defaultMetrics) collectDefaultMetrics({ register: registry, prefix: 'feedback_worker_' });
  return {
    registry,
    jobs: new Counter({ name: 'feedback_worker_jobs_total', help: 'Jobs processed, by outcome (completed, retried, delayed, failed).', labelNames: ['outcome'], registers: [registry] }),
    writes: new Counter({ name: 'feedback_worker_writes_total', help: 'Writes processed, by outcome (record, response, suggestion, stale, deferred, dead_lettered, erased: dropped or removed by an erasure, erasure: erasures run).', labelNames: ['outcome'], registers: [registry] }),
    batchSize: new Histogram({ name: 'feedback_worker_batch_size', help: 'Writes per job.', buckets: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000], registers: [registry] }),
    writeSeconds: new Histogram({ name: 'feedback_worker_write_duration_seconds', help: 'Time to store one job in MongoDB.', buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5], registers: [registry] }),
    lagSeconds: new Histogram({ name: 'feedback_worker_lag_seconds', help: 'From acceptance by the API to storage in MongoDB.', buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 2.5, 5, 10, 30, 60, 300], registers: [registry] }),
    storeRetries: new Counter({ name: 'feedback_worker_store_retries_total', help: 'Jobs put back because MongoDB was unreachable (no attempt used).', registers: [registry] }),
    deadLettered: new Counter({ name: 'feedback_worker_dead_lettered_total', help: 'Writes moved to the dead-letter collection, by reason.', labelNames: ['reason'], registers: [registry] }),
    consumerRestarts: new Counter({ name: 'feedback_worker_shard_worker_restarts_total', help: 'Shard workers replaced because they took no job for WORKER_STUCK_MS while jobs waited and none was in hand.', labelNames: ['shard'], registers: [registry] }),
  };
}
