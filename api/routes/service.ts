import type { ApiContext } from '../state.js';
import * as v from 'valibot';
import type { BacklogMonitor } from '../backlog.js';
import type { ApiMetrics } from '../metrics.js';

export const HealthBody = v.object({ status: v.literal('ok') });
type HealthBody = v.InferOutput<typeof HealthBody>;

/** The answer of `/readyz`, 200 or 503 alike. */
export const ReadinessBody = v.object({
  status: v.picklist(['ready', 'not_ready']),
  redis: v.picklist(['up', 'down']),
  backlog_jobs: v.nullable(v.number()),
  overloaded: v.boolean(),
});
type ReadinessBody = v.InferOutput<typeof ReadinessBody>;

export function getHealthz() {
  return (ctx: ApiContext): void => {
    ctx.body = { status: 'ok' } satisfies HealthBody;
  };
}

/** Ready when Redis answers now and the backlog is under the ceiling. */
export function getReadyz(backlog: BacklogMonitor) {
  return async (ctx: ApiContext): Promise<void> => {
    const state = await backlog.refresh();
    const ready = state.redisReachable && !state.overloaded;
    ctx.status = ready ? 200 : 503;
    ctx.body = { status: ready ? 'ready' : 'not_ready', redis: state.redisReachable ? 'up' : 'down', backlog_jobs: state.jobs ?? null, overloaded: state.overloaded } satisfies ReadinessBody;
  };
}

export function getMetrics(metrics: ApiMetrics) {
  return async (ctx: ApiContext): Promise<void> => {
    ctx.type = metrics.registry.contentType;
    ctx.body = await metrics.registry.metrics();
  };
}
