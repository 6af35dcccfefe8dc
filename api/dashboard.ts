import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { KoaAdapter } from '@bull-board/koa';
import type { ApiMiddleware } from './state.js';
import { AppError } from '../shared/errors.js';
import { bearerToken } from './middleware/auth.js';
import { decodeJob } from '../shared/job-payload.js';
import type { WriteQueues } from '../shared/queue.js';

/** Where the queue dashboard (bull-board) is mounted. */
const DASHBOARD_PATH = '/admin/queues';

interface DashboardOptions {
  /** Every shard is one queue of the dashboard. */
  readonly queues: WriteQueues;
  /**
   * Decides who may see the dashboard: receives the presented token (from `Authorization: Bearer`
   * or, so that a browser can log in, the password of `Authorization: Basic`) and answers whether
   * it is a key with the admin scope (`'admin'`), a known key without it (`'forbidden'`) or not a
   * key (`'unknown'`).
   */
  readonly authorize: (token: string) => 'admin' | 'forbidden' | 'unknown';
  /** Whether this API process sends writes to a shard (SHARD_REROUTE); absent = always. */
  readonly shardAnswers?: (index: number) => boolean;
}

/**
 * The description the dashboard shows under a shard's queue: what it holds, and, while this API
 * process routes writes around it (SHARD_REROUTE), that it does.
 */
export function shardDescription(shard: { readonly index: number; readonly prefix: string }, sharded: boolean, answers: boolean): string {
  const base = sharded ? `writes of shard ${shard.index} (Redis prefix ${shard.prefix}), waiting for the worker` : 'writes accepted by the API, waiting for the worker';
  return answers ? base : `${base}. NOT ANSWERING: new writes go to the other shards until it answers the probe again`;
}

const BASIC_RE = /^Basic +([A-Za-z0-9+/=]+) *$/i;
const CHALLENGE = 'Basic realm="feedback-ingest admin", charset="UTF-8"';

/** The token of an Authorization header: Bearer token, or the password of Basic credentials. */
export function presentedToken(header: string): string | undefined {
  const bearer = bearerToken(header);
  if (bearer !== undefined) return bearer;
  const basic = BASIC_RE.exec(header);
  if (basic === null) return undefined;
  const decoded = Buffer.from(basic[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  const password = colon === -1 ? '' : decoded.slice(colon + 1);
  return password === '' ? undefined : password;
}

/**
 * bull-board under {@link DASHBOARD_PATH}, for keys with the admin scope only. Browsers get a Basic
 * challenge (user name ignored, the admin key as password). Jobs are shown with their writes
 * decoded, whatever `QUEUE_COMPRESSION` packed them as.
 */
export function createDashboard(options: DashboardOptions): ApiMiddleware {
  const adapter = new KoaAdapter();
  adapter.setBasePath(DASHBOARD_PATH);
  const sharded = options.queues.shards.length > 1;
  const queues = options.queues.shards.map(({ shard, queue }) => {
    // bull-board tells queues apart by name, and the shards share QUEUE_NAME: the adapter's
    // display prefix names the shard.
    const adapter = new BullMQAdapter(queue, {
      readOnlyMode: false,
      allowRetries: true,
      ...(sharded ? { prefix: `shard-${shard.index}-` } : {}),
      description: shardDescription(shard, sharded, true),
    });
    // Read on every page load, so that the board shows the shard's health as this process sees it.
    adapter.getDescription = () => shardDescription(shard, sharded, options.shardAnswers?.(shard.index) ?? true);
    adapter.setFormatter('data', (data: unknown) => {
      const decoded = decodeJob(data);
      return decoded.ok ? { v: (data as { v: number }).v, writes: decoded.writes } : data;
    });
    return adapter;
  });
  createBullBoard({ queues, serverAdapter: adapter, options: { uiConfig: { boardTitle: 'feedback-ingest' } } });
  const board = adapter.registerPlugin();

  return async (ctx, next) => {
    if (ctx.path !== DASHBOARD_PATH && !ctx.path.startsWith(`${DASHBOARD_PATH}/`)) return next();
    const token = presentedToken(ctx.get('Authorization'));
    const verdict = token === undefined ? 'unknown' : options.authorize(token);
    if (verdict === 'unknown') {
      throw new AppError(token === undefined ? 'unauthorized' : 'invalid_api_key', 'the dashboard needs an admin API key (Bearer, or Basic with the key as password)', { headers: { 'WWW-Authenticate': CHALLENGE } });
    }
    if (verdict === 'forbidden') throw new AppError('forbidden', 'this API key has no admin scope');
    ctx.state.dashboard = true;
    await board(ctx, next);
  };
}
