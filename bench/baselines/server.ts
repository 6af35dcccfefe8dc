// A comparison server for the benchmark: the project's own Koa app (createApp, loaded from the
// compiled dist/ that the `web` process runs) with another Enqueuer behind it (the peers that are
// not this project's code are in bench/peers/), so that auth, body
// parsing, validation, id minting, logging and metrics are the same code as in the project and
// only the write path differs. BENCH_DESIGN picks it:
//   ceiling   answers 200 without writing anywhere (Koa's own ceiling for this app)
//   direct    one MongoDB write per request, no queue (insertOne per record with its first
//             response embedded; one upsert per /feedback-response)
// It reads the project's environment variables (PORT, REDIS_URL, MONGODB_URI, API_KEYS, …) and
// runs from the project's root directory. bench/run.ts runs it as plain JavaScript (types
// stripped into .cache/bench/), not through tsx, whose module hooks would slow every lazy
// require() at request time and so lower this server's numbers only.
import { createServer } from 'node:http';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type * as AppModule from '../../api/app.js';
import type * as EnqueuerModule from '../../api/enqueuer.js';
import type * as IdempotencyModule from '../../api/idempotency.js';
import type * as BacklogModule from '../../api/backlog.js';
import type * as MetricsModule from '../../api/metrics.js';
import type * as AuthModule from '../../api/key-verifier.js';
import type * as ConfigModule from '../../shared/config.js';
import type * as ErrorsModule from '../../shared/errors.js';
import type * as IdsModule from '../../shared/ids.js';
import type * as LoggerModule from '../../shared/logger.js';
import type * as MongoModule from '../../shared/mongo.js';
import type * as WritesModule from '../../shared/writes.js';
import type * as IndexesModule from '../../worker/indexes.js';
import type * as DocumentsModule from '../../worker/documents.js';

const ROOT = process.cwd();
const dist = async <T>(rel: string): Promise<T> => (await import(pathToFileURL(resolve(ROOT, 'dist', rel)).href)) as T;

const [{ createApp }, { createApiMetrics }, { createKeyVerifier }, { loadConfig }, { AppError }, { createIdMinter }, { createLogger }, { createMongo, COLLECTIONS }, { ensureIndexes }, { recordDoc }] =
  await Promise.all([
    dist<typeof AppModule>('api/app.js'),
    dist<typeof MetricsModule>('api/metrics.js'),
    dist<typeof AuthModule>('api/key-verifier.js'),
    dist<typeof ConfigModule>('shared/config.js'),
    dist<typeof ErrorsModule>('shared/errors.js'),
    dist<typeof IdsModule>('shared/ids.js'),
    dist<typeof LoggerModule>('shared/logger.js'),
    dist<typeof MongoModule>('shared/mongo.js'),
    dist<typeof IndexesModule>('worker/indexes.js'),
    dist<typeof DocumentsModule>('worker/documents.js'),
  ]);

type Enqueuer = EnqueuerModule.Enqueuer;
type Write = WritesModule.DataWrite;

const design = process.env['BENCH_DESIGN'] ?? '';
const config = loadConfig(process.env);
const logger = createLogger({ level: config.logLevel, name: `bench-${design}` });
const closers: (() => Promise<unknown>)[] = [];

const unavailable = (cause: unknown) =>
  new AppError('queue_unavailable', 'the write could not be stored; retry later', { headers: { 'Retry-After': String(config.retryAfterSeconds) }, cause });

async function buildEnqueuer(): Promise<Enqueuer> {
  switch (design) {
    case 'ceiling':
      return { enqueue: (write) => Promise.resolve({ jobId: '0', index: 0, seq: 0, write }), drain: () => Promise.resolve() };
    case 'direct': {
      const mongo = createMongo(config);
      // The same indexes as the project's collections, so index upkeep costs the same.
      await ensureIndexes(mongo.db);
      const records = mongo.db.collection<Record<string, unknown> & { _id: string }>(COLLECTIONS.records);
      const responses = mongo.db.collection<Record<string, unknown> & { _id: string }>(COLLECTIONS.responses);
      closers.push(() => mongo.close());
      const store = async (w: Write) => {
        const at = new Date(w.accepted_at);
        if (w.kind === 'record') {
          await records.insertOne({ ...recordDoc(w), first_response: { _id: w.response_id, ...w.response } });
        } else if (w.kind === 'response') {
          await responses.updateOne(
            { _id: w.response_id },
            {
              $set: { status: w.response.status, values: w.response.values, api_key: w.api_key, request_id: w.request_id, updated_at: at },
              $setOnInsert: { feedback_record_id: w.record_id, user_id: w.response.user_id, created_at: at },
            },
            { upsert: true },
          );
        }
      };
      return {
        async enqueue(write) {
          try {
            // The baseline stores feedback only; erasures are not part of what it compares.
            if (write.kind !== 'erasure') await store(write);
          } catch (err) {
            throw unavailable(err);
          }
          return { jobId: 'direct', index: 0, seq: 0, write };
        },
        drain: () => Promise.resolve(),
      };
    }
    default:
      throw new Error(`BENCH_DESIGN must be ceiling or direct, not "${design}"`);
  }
}

const idempotency: IdempotencyModule.IdempotencyStore = {
  claim: (fingerprint) => ({ value: fingerprint }),
  begin: () => Promise.reject(new Error('Idempotency-Key is not part of the benchmark')),
  complete: () => Promise.resolve(),
  release: () => Promise.resolve(),
};
// The project polls the backlog off the hot path; these designs have no ceiling to enforce.
const backlog: BacklogModule.BacklogMonitor = {
  state: () => ({ jobs: 0, redisReachable: true, overloaded: false }),
  refresh: () => Promise.resolve({ jobs: 0, redisReachable: true, overloaded: false }),
  stop: () => undefined,
};

const app = createApp({
  logger,
  metrics: createApiMetrics({ defaultMetrics: true }),
  keys: createKeyVerifier(config.apiKeys),
  ids: createIdMinter(config.idSigningSecrets),
  enqueuer: await buildEnqueuer(),
  idempotency,
  backlog,
  bodyLimitBytes: config.bodyLimitBytes,
  batchRequestMaxItems: config.batchRequestMaxItems,
  batchRequestMaxBytes: config.batchRequestMaxBytes,
  retryAfterSeconds: config.retryAfterSeconds,
});
// The same server settings as api/server.ts.
const server = createServer(app.callback());
server.headersTimeout = config.httpHeadersTimeoutMs;
server.requestTimeout = config.httpRequestTimeoutMs;
server.keepAliveTimeout = config.httpKeepAliveTimeoutMs;
server.listen(config.port, config.host, () => logger.info({ port: config.port, design }, 'bench server listening'));

const stop = () => {
  server.close();
  server.closeIdleConnections();
  void Promise.allSettled(closers.map((c) => c())).then(() => process.exit(0));
  setTimeout(() => process.exit(1), 3_000).unref();
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
