import type { ApiContext } from '../state.js';
import type { HealthBody, ReadinessBody } from '../answers.js';
import type { BacklogMonitor } from '../backlog.js';
import type { ApiMetrics } from '../metrics.js';

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
