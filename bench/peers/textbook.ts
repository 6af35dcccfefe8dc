// Peer (textbook): the API a team would write in an afternoon, not this project's code. Koa,
// @koa/router and koa-bodyparser; a bearer check; the top-level shape checked by hand; one BullMQ
// `queue.add` per request (one job per write, BullMQ's defaults), 200 once Redis acknowledged it.
// Reads PORT, HOST, REDIS_URL, QUEUE_NAME and API_KEYS (`name:secret,…`); `GET /elu` answers the
// event-loop utilisation counters (ms idle and active since start).
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { Router } from '@koa/router';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import Koa from 'koa';
import bodyParser from 'koa-bodyparser';

const port = Number(process.env['PORT'] ?? 3000);
const host = process.env['HOST'] ?? '127.0.0.1';
const tokens = new Set((process.env['API_KEYS'] ?? '').split(',').map((pair) => pair.slice(pair.indexOf(':') + 1)));
const redis = new Redis(process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: 1, enableOfflineQueue: false });
const queue = new Queue(process.env['QUEUE_NAME'] ?? 'textbook', { connection: redis });

const isObject = (x: unknown): x is Record<string, unknown> => typeof x === 'object' && x !== null && !Array.isArray(x);

const app = new Koa();
const router = new Router();

const auth: Koa.Middleware = async (ctx, next) => {
  const header = ctx.get('Authorization');
  if (!header.startsWith('Bearer ') || !tokens.has(header.slice(7))) {
    ctx.status = 401;
    ctx.body = { error: { code: 'unauthorized' } };
    return;
  }
  await next();
};

router.post('/feedback-record', auth, async (ctx) => {
  const body = ctx.request.body as Record<string, unknown>;
  const record = body['record'];
  const response = body['response'];
  if (!isObject(record) || typeof record['feedback_dataset_id'] !== 'string' || !isObject(response) || !isObject(response['values'])) {
    ctx.status = 400;
    ctx.body = { error: { code: 'validation_failed' } };
    return;
  }
  const ids = { feedback_record_id: randomUUID(), feedback_response_id: randomUUID() };
  await queue.add('record', { ...ids, record, response });
  ctx.body = { ...ids, status: response['status'] ?? 'submitted' };
});

router.post('/feedback-response', auth, async (ctx) => {
  const body = ctx.request.body as Record<string, unknown>;
  const response = body['response'];
  if (typeof body['feedback_record_id'] !== 'string' || !isObject(response) || !isObject(response['values'])) {
    ctx.status = 400;
    ctx.body = { error: { code: 'validation_failed' } };
    return;
  }
  const id = randomUUID();
  await queue.add('response', { feedback_record_id: body['feedback_record_id'], feedback_response_id: id, response });
  ctx.body = { feedback_record_id: body['feedback_record_id'], feedback_response_id: id, status: response['status'] };
});

router.get('/elu', (ctx) => {
  const { idle, active } = performance.eventLoopUtilization();
  ctx.body = { idle, active };
});

app.use(bodyParser());
app.use(router.routes());
app.use(router.allowedMethods());

const server = app.listen(port, host);
const stop = () => server.close(() => void queue.close().then(() => redis.quit()).finally(() => process.exit(0)));
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
