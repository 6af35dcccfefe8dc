import { MongoClient, type Db } from 'mongodb';
import { startApi, type ApiServer } from '../../api/server.js';
import type { Config } from '../../shared/config.js';
import { createLogger, type Logger } from '../../shared/logger.js';
import { COLLECTIONS, mongoClientOptions } from '../../shared/mongo.js';
import { startWorker, type WorkerRuntime } from '../../worker/runtime.js';
import { TEST_KEY } from './env.js';

export interface HttpResult {
  readonly status: number;
  readonly headers: Headers;
  readonly body: any;
  readonly text: string;
}

export interface Stack {
  readonly config: Config;
  readonly api: ApiServer;
  readonly baseUrl: string;
  worker: WorkerRuntime | undefined;
  readonly db: Db;
  /** POST JSON with the test key unless `headers` says otherwise. */
  post(path: string, body: unknown, headers?: Record<string, string>): Promise<HttpResult>;
  request(path: string, init: RequestInit): Promise<HttpResult>;
  startWorker(): Promise<WorkerRuntime>;
  stopWorker(): Promise<void>;
  close(): Promise<void>;
}

export const silentLogger: Logger = createLogger({ level: 'silent', name: 'test' });

/** The real API (listening on a free port) and, unless `worker: false`, the real worker, in-process. */
export async function startStack(config: Config, options: { worker?: boolean; logger?: Logger } = {}): Promise<Stack> {
  const logger = options.logger ?? silentLogger;
  const api = await startApi(config, logger);
  const client = new MongoClient(config.mongodbUri, { ...mongoClientOptions(), serverSelectionTimeoutMS: 5000 });
  const db = client.db(config.mongodbDatabase);
  const baseUrl = `http://127.0.0.1:${api.port}`;
  const request = async (path: string, init: RequestInit): Promise<HttpResult> => {
    const res = await fetch(baseUrl + path, init);
    const text = await res.text();
    let body: unknown;
    try {
      body = text === '' ? undefined : JSON.parse(text);
    } catch {
      body = undefined;
    }
    return { status: res.status, headers: res.headers, body, text };
  };
  const stack: Stack = {
    config,
    api,
    baseUrl,
    worker: undefined,
    db,
    request,
    post(path, body, headers = {}) {
      return request(path, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${TEST_KEY.secret}`, ...headers },
        body: typeof body === 'string' ? body : JSON.stringify(body),
      });
    },
    async startWorker() {
      stack.worker = await startWorker(config, logger);
      return stack.worker;
    },
    async stopWorker() {
      await stack.worker?.close();
      stack.worker = undefined;
    },
    async close() {
      await stack.stopWorker();
      await api.close();
      await db.dropDatabase().catch(() => undefined);
      await client.close();
    },
  };
  if (options.worker !== false) await stack.startWorker();
  return stack;
}

/** Polls `check` until it returns a value other than undefined, or fails after `timeoutMs`. */
export async function eventually<T>(check: () => Promise<T | undefined>, timeoutMs = 10_000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export function records(db: Db) {
  return db.collection<Record<string, any> & { _id: string }>(COLLECTIONS.records);
}
export function responses(db: Db) {
  return db.collection<Record<string, any> & { _id: string }>(COLLECTIONS.responses);
}
export function deadLetters(db: Db) {
  return db.collection<Record<string, any> & { _id: string }>(COLLECTIONS.deadLetters);
}

export function recordBody(overrides: { record?: Record<string, unknown>; response?: Record<string, unknown> } = {}) {
  return {
    record: { feedback_dataset_id: 'ds_test', field_to_value: { prompt: 'How do I reset my password?', answer: 'Go to Settings' }, ...overrides.record },
    response: { values: { helpful: 1 }, ...overrides.response },
  };
}
