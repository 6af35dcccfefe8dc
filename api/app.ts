import type Koa from 'koa';
import { Router } from '@koa/router';
import type { ApiMiddleware, ApiState } from './state.js';
import { AppError } from '../shared/errors.js';
import type { IdMinter } from '../shared/ids.js';
import type { Logger } from '../shared/logger.js';
import type { BacklogMonitor } from './backlog.js';
import type { Enqueuer } from './enqueuer.js';
import type { IdempotencyStore } from './idempotency.js';
import type { ApiMetrics } from './metrics.js';
import type { DeadLetterAdmin } from '../shared/dead-letter-admin.js';
import { requireAdmin } from './middleware/admin.js';
import { authenticate } from './middleware/auth.js';
import type { KeyVerifier } from './key-verifier.js';
import { browserCors } from './middleware/cors.js';
import type { FeedbackTokens } from './feedback-tokens.js';
import { FEEDBACK_TOKENS_PATH, postFeedbackToken } from './routes/feedback-tokens.js';
import { ERASURES_PATH, getErasure } from './routes/erasures.js';
import type { Collection } from 'mongodb';
import type { ErasureDoc } from '../shared/erasures.js';
import { DEAD_LETTERS_PATH, deleteDeadLetter, getDeadLetter, listDeadLetters, retryDeadLetter } from './routes/dead-letters.js';
import { errorHandler } from './middleware/errors.js';
import { LeanWriteApp } from './lean-routes.js';
import { jsonBody } from './middleware/json-body.js';
import { pathEncoding } from './middleware/path-encoding.js';
import { requestId } from './middleware/request-id.js';
import { requestLog } from './middleware/request-log.js';
import { createWritePipeline, FEEDBACK_BATCH_PATH } from './write-pipeline.js';
import { WRITE_KINDS, type WriteKind } from './write-kinds.js';
import { NO_DATASET_GATE, type DatasetGate } from './dataset-gate.js';
import { DATASETS_PATH, getDataset, getDatasetSchema, listDatasets, putDataset, type DatasetRouteDeps } from './routes/datasets.js';
import { exportDataset, getFeedbackRecord, listDatasetRecords, requireRead } from './routes/reads.js';
import { getAgreement } from './routes/agreement.js';
import { getDatasetProgress, getRecordHistory } from './routes/annotation.js';
import type { AnnotationReader } from './annotation-reads.js';
import type { RecordReader } from './reads.js';
import { getHealthz, getMetrics, getReadyz } from './routes/service.js';
import { createOpenApiDocument } from './openapi.js';
import { getOpenApi } from './routes/openapi.js';
import { createDashboard } from './dashboard.js';
import type { WriteQueues } from '../shared/queue.js';
import { createWebhook, deleteWebhook, listWebhookDeliveries, listWebhooks, replayWebhookDeliveries, testWebhook, WEBHOOKS_PATH, type WebhookRouteDeps } from './routes/webhooks.js';

interface AppDeps {
  readonly logger: Logger;
  readonly metrics: ApiMetrics;
  readonly keys: KeyVerifier;
  readonly ids: IdMinter;
  readonly enqueuer: Enqueuer;
  readonly idempotency: IdempotencyStore;
  readonly backlog: BacklogMonitor;
  readonly bodyLimitBytes: number;
  /** Most items of one `POST /feedback-batch` (`BATCH_REQUEST_MAX_ITEMS`). */
  readonly batchRequestMaxItems: number;
  /** Body limit of `POST /feedback-batch` (`BATCH_REQUEST_MAX_BYTES`), bytes. */
  readonly batchRequestMaxBytes: number;
  readonly retryAfterSeconds: number;
  /** Per-key rate limit of the write routes (api/rate-limit.ts), after authentication; absent = none (the benchmark's servers). */
  readonly rateLimit?: ApiMiddleware;
  /** The dead-letter tools behind `/admin/dead-letters` (admin scope); absent = not mounted (the benchmark's servers). */
  readonly deadLetters?: DeadLetterAdmin;
  /** The queues (one per shard) shown by the bull-board dashboard under `/admin/queues` (admin scope); absent = not mounted. */
  readonly dashboardQueues?: WriteQueues;
  /** Which shards this process sends writes to (SHARD_REROUTE), shown on the dashboard; absent = all. */
  readonly shardAnswers?: (index: number) => boolean;
  /**
   * Browser feedback tokens: `POST /feedback-tokens` mints them, `POST /feedback-response` takes
   * them; `maxTtlSeconds` is `FEEDBACK_TOKEN_MAX_TTL_SECONDS`. Absent = neither (the benchmark's servers).
   */
  readonly feedbackTokens?: { readonly tokens: FeedbackTokens; readonly maxTtlSeconds: number };
  /** `CORS_ORIGINS`: origins whose pages may call `POST /feedback-response`; absent or empty = no CORS. */
  readonly corsOrigins?: readonly string[];
  /** Dataset definitions: the writes' checks and the `/datasets` endpoints; absent = no checks, not mounted (the benchmark's peers). */
  readonly datasets?: DatasetRouteDeps & { readonly gate: DatasetGate };
  /** `GET /admin/erasures/{id}` reads the worker's erasure documents here; absent = not mounted (`POST` is a write kind, always mounted). */
  readonly erasures?: Collection<ErasureDoc>;
  /** The read endpoints' store access (`GET /feedback-record/:id`, `/datasets/...`; read scope); absent = not mounted (the benchmark's servers). */
  readonly reader?: RecordReader;
  /** `MONGODB_TIMEOUT_MS`: the bound of a read that ends with one answer (api/routes/reads.ts `fromStore`); absent = the driver's. */
  readonly readTimeoutMs?: number;
  /** Response history and dataset progress (read scope); absent = not mounted. */
  readonly annotation?: AnnotationReader;
  /** Webhook endpoints under `/admin/webhooks` (admin scope); absent = not mounted (the benchmark's servers). */
  readonly webhooks?: WebhookRouteDeps;
}

/** The routes a browser page calls (with a feedback token); the only ones that answer CORS. */
const BROWSER_PATHS = ['/feedback-response'];

/** Routes and middleware; never listens (api/main.ts does), so tests mount it on any server. */
export function createApp(deps: AppDeps): Koa<ApiState> {
  const app = new LeanWriteApp({ proxy: false });
  // Errors are rendered by errorHandler; Koa's own handler would print to stderr.
  app.silent = true;

  const pipeline = createWritePipeline({ logger: deps.logger, enqueuer: deps.enqueuer, idempotency: deps.idempotency, ids: deps.ids, backlog: deps.backlog, retryAfterSeconds: deps.retryAfterSeconds, datasets: deps.datasets?.gate ?? NO_DATASET_GATE });
  const rateLimit = deps.rateLimit === undefined ? [] : [deps.rateLimit];
  const keyAuth = { retryAfterSeconds: deps.retryAfterSeconds };
  const auth = authenticate(deps.keys, keyAuth);
  const router = new Router<ApiState>();
  // Every write kind at its own path, through the one pipeline; a kind a browser may send also
  // takes feedback tokens (when they are configured).
  const writeRoutes: Record<string, ApiMiddleware[]> = {};
  const mountWrite = (kind: WriteKind<unknown, unknown>): void => {
    const tokens = kind.feedbackToken ? deps.feedbackTokens?.tokens : undefined;
    const who = tokens === undefined ? auth : authenticate(deps.keys, { ...keyAuth, feedbackTokens: tokens });
    const chain = [who, ...rateLimit, ...jsonBody({ limitBytes: deps.bodyLimitBytes }), pipeline.one(kind)];
    writeRoutes[kind.path] = chain;
    // The router keeps the route too, for its 405 on another method of the same path.
    router.post(kind.path, ...chain);
  };
  WRITE_KINDS.forEach(mountWrite);
  if (deps.feedbackTokens !== undefined) {
    const { tokens, maxTtlSeconds } = deps.feedbackTokens;
    router.post(FEEDBACK_TOKENS_PATH, auth, ...rateLimit, ...jsonBody({ limitBytes: deps.bodyLimitBytes }), postFeedbackToken({ ids: deps.ids, tokens, maxTtlSeconds }));
  }
  router.post(FEEDBACK_BATCH_PATH, auth, ...rateLimit, ...jsonBody({ limitBytes: deps.batchRequestMaxBytes }), pipeline.batch(deps.batchRequestMaxItems, deps.bodyLimitBytes));
  if (deps.reader !== undefined) {
    const read = [authenticate(deps.keys, keyAuth), requireRead()];
    const readDeps = { reader: deps.reader, ids: deps.ids, retryAfterSeconds: deps.retryAfterSeconds, ...(deps.readTimeoutMs === undefined ? {} : { readTimeoutMs: deps.readTimeoutMs }) };
    router.get('/feedback-record/:id', ...read, getFeedbackRecord(readDeps));
    router.get('/datasets/:dataset_id/records', ...read, listDatasetRecords(readDeps));
    router.get('/datasets/:dataset_id/export', ...read, exportDataset(readDeps));
    router.get('/datasets/:dataset_id/agreement', ...read, getAgreement({ ...readDeps, registry: deps.datasets?.registry }));
    if (deps.annotation !== undefined) {
      const annotationDeps = { ...readDeps, annotation: deps.annotation, registry: deps.datasets?.registry };
      router.get('/feedback-record/:id/history', ...read, getRecordHistory(annotationDeps));
      router.get('/datasets/:dataset_id/progress', ...read, getDatasetProgress(annotationDeps));
    }
  }
  router.get('/healthz', getHealthz());
  router.get('/openapi.json', getOpenApi(createOpenApiDocument({ batchRequestMaxItems: deps.batchRequestMaxItems })));
  router.get('/readyz', getReadyz(deps.backlog));
  router.get('/metrics', getMetrics(deps.metrics));
  if (deps.datasets !== undefined) {
    const admin = [authenticate(deps.keys, keyAuth), requireAdmin()];
    router.put(`${DATASETS_PATH}/:id`, ...admin, ...jsonBody({ limitBytes: deps.bodyLimitBytes }), putDataset(deps.datasets));
    router.get(`${DATASETS_PATH}/:id`, ...admin, getDataset(deps.datasets));
    router.get(DATASETS_PATH, ...admin, listDatasets(deps.datasets));
    router.get(`${DATASETS_PATH}/:id/schema`, authenticate(deps.keys, keyAuth), getDatasetSchema(deps.datasets));
  }
  if (deps.erasures !== undefined) {
    router.get(`${ERASURES_PATH}/:id`, authenticate(deps.keys, keyAuth), requireAdmin(), getErasure({ erasures: deps.erasures, ids: deps.ids, retryAfterSeconds: deps.retryAfterSeconds, ...(deps.readTimeoutMs === undefined ? {} : { readTimeoutMs: deps.readTimeoutMs }) }));
  }
  if (deps.deadLetters !== undefined) {
    const admin = [authenticate(deps.keys, keyAuth), requireAdmin()];
    const dl = { deadLetters: deps.deadLetters, retryAfterSeconds: deps.retryAfterSeconds, datasets: deps.datasets?.gate ?? NO_DATASET_GATE };
    router.get(DEAD_LETTERS_PATH, ...admin, listDeadLetters(dl));
    router.get(`${DEAD_LETTERS_PATH}/:id`, ...admin, getDeadLetter(dl));
    router.post(`${DEAD_LETTERS_PATH}/:id/retry`, ...admin, retryDeadLetter(dl));
    router.delete(`${DEAD_LETTERS_PATH}/:id`, ...admin, deleteDeadLetter(dl));
  }
  if (deps.webhooks !== undefined) {
    const admin = [authenticate(deps.keys, keyAuth), requireAdmin()];
    const wh = deps.webhooks;
    router.post(WEBHOOKS_PATH, ...admin, ...jsonBody({ limitBytes: deps.bodyLimitBytes }), createWebhook(wh));
    router.get(WEBHOOKS_PATH, ...admin, listWebhooks(wh));
    router.delete(`${WEBHOOKS_PATH}/:id`, ...admin, deleteWebhook(wh));
    router.post(`${WEBHOOKS_PATH}/:id/test`, ...admin, testWebhook(wh));
    router.get(`${WEBHOOKS_PATH}/:id/deliveries`, ...admin, listWebhookDeliveries(wh));
    router.post(`${WEBHOOKS_PATH}/:id/replay`, ...admin, replayWebhookDeliveries(wh));
  }

  // App-wide, in this order, for every route; the write routes get the same instances (below).
  const outer: ApiMiddleware[] = [requestId(), requestLog({ logger: deps.logger, metrics: deps.metrics })];
  // Before the router: a preflight from an allowed origin is answered 204 here; any other OPTIONS
  // reaches allowedMethods below. Outside the error handler, so that every error answer keeps the
  // CORS headers, a 500 included (the handler renders those with fresh headers).
  if (deps.corsOrigins !== undefined && deps.corsOrigins.length > 0) {
    outer.push(browserCors({ origins: deps.corsOrigins, paths: BROWSER_PATHS, methods: ['POST'] }));
  }
  outer.push(errorHandler({ logger: deps.logger, metrics: deps.metrics, retryAfterSeconds: deps.retryAfterSeconds }));
  outer.forEach((mw) => app.use(mw));
  // The write kinds' routes are answered ahead of Koa (api/lean-routes.ts), through `outer` and
  // their own chain; the router keeps them for its 405s and for other spellings of their paths.
  app.leanRoutes(outer, writeRoutes, deps.logger);
  // allowedMethods (non-throwing) sets 405/501 with Allow after the routes ran; turn that, and an
  // unmatched path, into the error shape of the contract.
  app.use(pathEncoding());
  app.use(async (ctx, next) => {
    await next();
    if (ctx.status === 405 || ctx.status === 501) {
      throw new AppError('method_not_allowed', `${ctx.method} is not allowed on ${ctx.path}`, { headers: { Allow: ctx.response.get('Allow') } });
    }
    if (ctx.status === 404 && ctx.body == null) throw new AppError('not_found', `no route for ${ctx.method} ${ctx.path}`);
  });
  app.use(router.routes());
  // Below the router: only a request no route matched reaches the dashboard, never a write.
  if (deps.dashboardQueues !== undefined) {
    const keys = deps.keys;
    app.use(createDashboard({
      queues: deps.dashboardQueues,
      ...(deps.shardAnswers === undefined ? {} : { shardAnswers: deps.shardAnswers }),
      authorize: (token) => {
        const key = keys.verify(token);
        return key === undefined ? 'unknown' : key.admin ? 'admin' : 'forbidden';
      },
    }));
  }
  app.use(router.allowedMethods());
  return app;
}
