import Koa, { type Middleware } from 'koa';
import { Router } from '@koa/router';
import { AppError } from '../shared/errors.js';
import type { IdMinter } from '../shared/ids.js';
import type { Logger } from '../shared/logger.js';
import type { BacklogMonitor } from './backlog.js';
import type { Enqueuer } from './enqueuer.js';
import type { IdempotencyStore } from './idempotency.js';
import type { ApiMetrics } from './metrics.js';
import type { DeadLetterAdmin } from '../shared/dead-letter-admin.js';
import { requireAdmin } from './middleware/admin.js';
import { authenticate, type KeyVerifier } from './middleware/auth.js';
import { DEAD_LETTERS_PATH, deleteDeadLetter, getDeadLetter, listDeadLetters, retryDeadLetter } from './routes/dead-letters.js';
import { errorHandler } from './middleware/errors.js';
import { jsonBody } from './middleware/json-body.js';
import { requestId } from './middleware/request-id.js';
import { requestLog } from './middleware/request-log.js';
import { postFeedbackRecord, postFeedbackResponse } from './routes/feedback.js';
import { exportDataset, getFeedbackRecord, listDatasetRecords, requireRead } from './routes/reads.js';
import type { RecordReader } from './reads.js';
import { getHealthz, getMetrics, getReadyz } from './routes/service.js';
import { createOpenApiDocument } from './openapi.js';
import { getOpenApi } from './routes/openapi.js';
import { createDashboard } from './dashboard.js';
import type { WriteQueue } from '../shared/queue.js';

interface AppDeps {
  readonly logger: Logger;
  readonly metrics: ApiMetrics;
  readonly keys: KeyVerifier;
  readonly ids: IdMinter;
  readonly enqueuer: Enqueuer;
  readonly idempotency: IdempotencyStore;
  readonly backlog: BacklogMonitor;
  readonly bodyLimitBytes: number;
  readonly retryAfterSeconds: number;
  /** Per-key rate limit of the write routes (api/rate-limit.ts), after authentication; absent = none (the benchmark's servers). */
  readonly rateLimit?: Middleware;
  /** The dead-letter tools behind `/admin/dead-letters` (admin scope); absent = not mounted (the benchmark's servers). */
  readonly deadLetters?: DeadLetterAdmin;
  /** The read endpoints' store access (`GET /feedback-record/:id`, `/datasets/...`; read scope); absent = not mounted (the benchmark's servers). */
  readonly reader?: RecordReader;
  /** The queue shown by the bull-board dashboard under `/admin/queues` (admin scope); absent = not mounted. */
  readonly dashboardQueue?: WriteQueue;
}

/** Routes and middleware; never listens (api/main.ts does), so tests mount it on any server. */
export function createApp(deps: AppDeps): Koa {
  const app = new Koa({ proxy: false });
  // Errors are rendered by errorHandler; Koa's own handler would print to stderr.
  app.silent = true;

  const routeDeps = { logger: deps.logger, enqueuer: deps.enqueuer, idempotency: deps.idempotency, ids: deps.ids, backlog: deps.backlog, retryAfterSeconds: deps.retryAfterSeconds };
  const write = [authenticate(deps.keys), ...(deps.rateLimit === undefined ? [] : [deps.rateLimit]), ...jsonBody({ limitBytes: deps.bodyLimitBytes })];
  const router = new Router();
  router.post('/feedback-record', ...write, postFeedbackRecord(routeDeps));
  router.post('/feedback-response', ...write, postFeedbackResponse(routeDeps));
  if (deps.reader !== undefined) {
    const read = [authenticate(deps.keys), requireRead()];
    const readDeps = { reader: deps.reader, ids: deps.ids, retryAfterSeconds: deps.retryAfterSeconds };
    router.get('/feedback-record/:id', ...read, getFeedbackRecord(readDeps));
    router.get('/datasets/:dataset_id/records', ...read, listDatasetRecords(readDeps));
    router.get('/datasets/:dataset_id/export', ...read, exportDataset(readDeps));
  }
  router.get('/healthz', getHealthz());
  router.get('/openapi.json', getOpenApi(createOpenApiDocument()));
  router.get('/readyz', getReadyz(deps.backlog));
  router.get('/metrics', getMetrics(deps.metrics));
  if (deps.deadLetters !== undefined) {
    const admin = [authenticate(deps.keys), requireAdmin()];
    const dl = { deadLetters: deps.deadLetters, retryAfterSeconds: deps.retryAfterSeconds };
    router.get(DEAD_LETTERS_PATH, ...admin, listDeadLetters(dl));
    router.get(`${DEAD_LETTERS_PATH}/:id`, ...admin, getDeadLetter(dl));
    router.post(`${DEAD_LETTERS_PATH}/:id/retry`, ...admin, retryDeadLetter(dl));
    router.delete(`${DEAD_LETTERS_PATH}/:id`, ...admin, deleteDeadLetter(dl));
  }

  app.use(requestId());
  app.use(requestLog({ logger: deps.logger, metrics: deps.metrics }));
  app.use(errorHandler({ logger: deps.logger, metrics: deps.metrics }));
  // allowedMethods (non-throwing) sets 405/501 with Allow after the routes ran; turn that, and an
  // unmatched path, into the error shape of the contract.
  app.use(async (ctx, next) => {
    await next();
    if (ctx.status === 405 || ctx.status === 501) {
      throw new AppError('method_not_allowed', `${ctx.method} is not allowed on ${ctx.path}`, { headers: { Allow: ctx.response.get('Allow') } });
    }
    if (ctx.status === 404 && ctx.body == null) throw new AppError('not_found', `no route for ${ctx.method} ${ctx.path}`);
  });
  app.use(router.routes());
  // Below the router: only a request no route matched reaches the dashboard, never a write.
  if (deps.dashboardQueue !== undefined) {
    const keys = deps.keys;
    app.use(createDashboard({
      queue: deps.dashboardQueue,
      authorize: (token) => {
        const key = keys.verify(token);
        return key === undefined ? 'unknown' : key.admin ? 'admin' : 'forbidden';
      },
    }));
  }
  app.use(router.allowedMethods());
  return app;
}
