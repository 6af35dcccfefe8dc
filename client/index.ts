import type { ErrorDetail } from '../shared/errors.js';
import { FeedbackApiError, type FeedbackErrorCode } from './errors.js';
import { ndjsonValues } from './ndjson.js';
import { DEFAULT_RETRY_POLICY, nextStep, parseRetryAfter, type AttemptOutcome, type RetryPolicy } from './retry.js';
import type { Accepted, Agreement, AgreementQuery, BatchItemInput, BatchResult, ErasureAccepted, ErasureInput, ErasureView, ListRecordsQuery, Progress, RecordFiltersQuery, RecordHistory, RecordInput, RecordPage, RecordView, ResponseInput, SuggestionAccepted, SuggestionInput } from './types.js';
import type { WebhookDeliveriesQuery, WebhookDeliveryList, WebhookEndpointCreated, WebhookEndpointDeleted, WebhookEndpointInput, WebhookEndpointList, WebhookPing, WebhookReplay } from './types.js';

export { FeedbackApiError, isFeedbackApiError, type FeedbackErrorCode } from './errors.js';
export { DEFAULT_RETRY_POLICY, isRetryable, nextStep, parseRetryAfter, retryDelayMs, type AttemptOutcome, type RetryDecision, type RetryPolicy } from './retry.js';
export type * from './types.js';

export interface FeedbackClientOptions {
  /** The service's base URL, e.g. `https://feedback.example.com`. */
  readonly baseUrl: string;
  /** An API key (`Authorization: Bearer <key>`). */
  readonly apiKey: string;
  /** Budget of one logical call, all attempts and waits included, ms. Default 30,000. */
  readonly timeoutMs?: number;
  /** Longest wait for one attempt's answer, ms. Default 10,000. */
  readonly attemptTimeoutMs?: number;
  /** Retry policy; see {@link DEFAULT_RETRY_POLICY}. `{ maxAttempts: 1 }` turns retries off. */
  readonly retry?: Partial<RetryPolicy>;
  /** The fetch to use; default the global one (Node 18+, browsers, Deno, Bun). */
  readonly fetch?: typeof fetch;
  /** Mints one Idempotency-Key per logical write; default `crypto.randomUUID()`. */
  readonly idempotencyKey?: () => string;
  /** Randomness of the backoff jitter, in [0, 1); default `Math.random`. */
  readonly random?: () => number;
}

export interface CallOptions {
  /** Cancels the call, retries included (rejects with code `aborted`). */
  readonly signal?: AbortSignal;
  /** This call's budget instead of the client's `timeoutMs`, ms. */
  readonly timeoutMs?: number;
  /**
   * The write's Idempotency-Key instead of a fresh one: pass a key derived from your own data
   * (a conversation turn id) to stay safe across restarts of your process, not only across retries.
   */
  readonly idempotencyKey?: string;
  /** Sent as `X-Request-Id` on every attempt (it shows in the service's logs). */
  readonly requestId?: string;
}

export interface FeedbackClient {
  /** `POST /feedback-record`: a record and its first response (and, optionally, model suggestions). */
  createRecord(body: RecordInput, options?: CallOptions): Promise<Accepted>;
  /** `POST /feedback-response`: a response to a record (a later one by the same annotator updates it). */
  respond(body: ResponseInput, options?: CallOptions): Promise<Accepted>;
  /** `POST /feedback-suggestion`: a model's suggestion for one question of a record (a later one by the same agent replaces it). */
  suggest(body: SuggestionInput, options?: CallOptions): Promise<SuggestionAccepted>;
  /**
   * `POST /feedback-batch`: up to 500 items (the service's `BATCH_REQUEST_MAX_ITEMS`) in one call.
   * Resolves with each item's outcome, in order: check each item's `status` (refused items do not
   * reject the call). Rejects only when the whole call failed (then nothing is promised, and the
   * retries, with the same key, are what makes it safe).
   */
  createRecords(items: readonly BatchItemInput[], options?: CallOptions): Promise<BatchResult>;
  /**
   * `POST /admin/erasures` (admin key): erase a user's feedback, ordered after every write
   * acknowledged before the 202. Poll {@link getErasure} until `done`. Pass an `idempotencyKey`
   * so that a retry after a lost answer does not queue a second erasure.
   */
  erase(body: ErasureInput, options?: CallOptions): Promise<ErasureAccepted>;
  /** `GET /admin/erasures/{id}` (admin key): `pending` or `done`, and what it removed. */
  getErasure(id: string, options?: CallOptions): Promise<ErasureView>;
  /** `GET /feedback-record/{id}`: the stored record with its responses (404 `record_pending` while still queued). */
  getRecord(id: string, options?: CallOptions): Promise<RecordView>;
  /** `GET /datasets/{id}/records`: one page. */
  listRecords(datasetId: string, query?: ListRecordsQuery, options?: CallOptions): Promise<RecordPage>;
  /** Every record of a listing, page after page (each page a call with its own retries). */
  iterateRecords(datasetId: string, query?: Omit<ListRecordsQuery, 'cursor'>, options?: CallOptions): AsyncGenerator<RecordView, void, undefined>;
  /**
   * `GET /datasets/{id}/export`: every record, streamed. Retries, timeouts and the signal apply
   * until the answer starts; after that, stop iterating to end the download.
   */
  exportRecords(datasetId: string, options?: Omit<CallOptions, 'idempotencyKey'>, filters?: RecordFiltersQuery): AsyncGenerator<RecordView, void, undefined>;
  /** `GET /datasets/{id}/agreement`: Krippendorff's alpha of one question over the submitted responses. */
  getAgreement(datasetId: string, query: AgreementQuery, options?: CallOptions): Promise<Agreement>;
  /** `GET /feedback-record/{id}/history`: each response of the record with its versions, oldest first. */
  getRecordHistory(id: string, options?: CallOptions): Promise<RecordHistory>;
  /** `GET /datasets/{id}/progress`: records by completion status, responses by status, per annotator. */
  getProgress(datasetId: string, options?: CallOptions): Promise<Progress>;
  /** `POST /admin/webhooks` (admin key): the answer holds the signing secret, shown only once. Not retried (a retry would register a second endpoint). */
  createWebhook(body: WebhookEndpointInput, options?: CallOptions): Promise<WebhookEndpointCreated>;
  /** `GET /admin/webhooks` (admin key): every endpoint with its deliveries by status. */
  listWebhooks(options?: CallOptions): Promise<WebhookEndpointList>;
  /** `DELETE /admin/webhooks/{id}` (admin key). */
  deleteWebhook(id: string, options?: CallOptions): Promise<WebhookEndpointDeleted>;
  /** `POST /admin/webhooks/{id}/test` (admin key): a signed ping, sent now. Not retried. */
  testWebhook(id: string, options?: CallOptions): Promise<WebhookPing>;
  /** `GET /admin/webhooks/{id}/deliveries` (admin key). */
  listWebhookDeliveries(id: string, query?: WebhookDeliveriesQuery, options?: CallOptions): Promise<WebhookDeliveryList>;
  /** `POST /admin/webhooks/{id}/replay` (admin key): failed deliveries, and those they held back, go out again in order. */
  replayWebhookDeliveries(id: string, options?: CallOptions): Promise<WebhookReplay>;
}

interface ErrorBody {
  readonly error: { readonly code: string; readonly message: string; readonly details?: readonly ErrorDetail[] };
}

function isErrorBody(body: unknown): body is ErrorBody {
  const error = (body as { error?: unknown } | null)?.error as { code?: unknown; message?: unknown } | undefined;
  return typeof error === 'object' && error !== null && typeof error.code === 'string' && typeof error.message === 'string';
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

type Attempt =
  | { readonly kind: 'answer'; readonly res: Response; readonly text: string | undefined }
  | { readonly kind: 'network' | 'timeout' | 'aborted'; readonly cause: unknown };

/** Rejects when `signal` aborts, else resolves after `ms`. */
function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

function queryString(query: ListRecordsQuery | RecordFiltersQuery | AgreementQuery | WebhookDeliveriesQuery): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query) as [string, unknown][]) {
    if (value === undefined) continue;
    if (name === 'metadata' && typeof value === 'object' && value !== null) {
      // One `metadata.<key>` parameter per key.
      for (const [key, item] of Object.entries(value as Record<string, unknown>)) params.set(`metadata.${key}`, String(item));
      continue;
    }
    // A list (annotators, include_agents) is one comma-separated parameter: the API refuses a repeated one.
    params.set(name, value instanceof Date ? value.toISOString() : Array.isArray(value) ? value.join(',') : String(value));
  }
  const text = params.toString();
  return text === '' ? '' : `?${text}`;
}

export function createFeedbackClient(options: FeedbackClientOptions): FeedbackClient {
  const baseUrl = options.baseUrl.replace(/\/+$/, '');
  const fetchImpl = options.fetch ?? globalThis.fetch.bind(globalThis);
  const policy: RetryPolicy = { ...DEFAULT_RETRY_POLICY, ...options.retry };
  const defaultTimeoutMs = options.timeoutMs ?? 30_000;
  const attemptTimeoutMs = options.attemptTimeoutMs ?? 10_000;
  const mintKey = options.idempotencyKey ?? (() => globalThis.crypto.randomUUID());
  const random = options.random ?? Math.random;

  /**
   * One attempt. Its own timeout covers the answer and, when `readBody`, the body; the caller's
   * signal aborts it too, and which of the two fired decides what the caller is told.
   */
  async function attemptOnce(url: string, init: RequestInit, timeoutMs: number, signal: AbortSignal | undefined, readBody: boolean): Promise<Attempt> {
    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort(new Error(`no answer within ${timeoutMs} ms`));
    }, timeoutMs);
    const onAbort = () => controller.abort(signal?.reason);
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      const res = await fetchImpl(url, { ...init, signal: controller.signal });
      const text = readBody || !res.ok ? await res.text() : undefined;
      return { kind: 'answer', res, text };
    } catch (cause) {
      if (signal?.aborted) return { kind: 'aborted', cause };
      return { kind: timedOut ? 'timeout' : 'network', cause };
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    }
  }

  /**
   * A logical call: attempts until a success, a final answer, `maxAttempts` or the call's budget.
   * A write carries one Idempotency-Key on every attempt, so an attempt whose answer was lost
   * (it may have been stored) and its retry store one write.
   */
  async function call(method: 'GET' | 'POST' | 'DELETE', path: string, body: unknown, callOptions: CallOptions, readBody = true, once = false): Promise<{ res: Response; json: unknown }> {
    const { signal } = callOptions;
    const idempotencyKey = method === 'POST' ? (callOptions.idempotencyKey ?? mintKey()) : undefined;
    const headers: Record<string, string> = { Authorization: `Bearer ${options.apiKey}`, Accept: 'application/json' };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    if (idempotencyKey !== undefined) headers['Idempotency-Key'] = idempotencyKey;
    if (callOptions.requestId !== undefined) headers['X-Request-Id'] = callOptions.requestId;
    const init: RequestInit = { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) };
    const url = `${baseUrl}${path}`;
    const deadline = Date.now() + (callOptions.timeoutMs ?? defaultTimeoutMs);
    const fail = (code: FeedbackErrorCode, message: string, attempts: number, extra: Partial<ConstructorParameters<typeof FeedbackApiError>[0]> = {}) =>
      new FeedbackApiError({ message, code, attempts, idempotencyKey, ...extra });

    for (let attempt = 1; ; attempt++) {
      const remaining = deadline - Date.now();
      if (remaining <= 0) throw fail('timeout', `${method} ${path}: no success within the call's timeout`, attempt - 1);
      const result = await attemptOnce(url, init, Math.min(attemptTimeoutMs, remaining), signal, readBody);
      let outcome: AttemptOutcome;
      let error: FeedbackApiError;
      if (result.kind === 'aborted') throw fail('aborted', `${method} ${path}: aborted by the caller`, attempt, { cause: result.cause });
      if (result.kind !== 'answer') {
        outcome = { kind: result.kind };
        error = fail(result.kind === 'timeout' ? 'timeout' : 'network_error', `${method} ${path}: ${result.kind === 'timeout' ? 'no answer in time' : 'no answer'} (${(result.cause as Error)?.message ?? result.cause})`, attempt, { cause: result.cause });
      } else {
        const { res } = result;
        const json = result.text === undefined ? undefined : parseJson(result.text);
        if (res.ok) {
          if (readBody && json === undefined) throw fail('unexpected_response', `${method} ${path}: ${res.status} without a JSON body`, attempt, { status: res.status });
          return { res, json };
        }
        const requestId = res.headers.get('x-request-id') ?? undefined;
        const retryAfterMs = parseRetryAfter(res.headers.get('retry-after'), Date.now());
        const body = isErrorBody(json) ? json.error : undefined;
        outcome = { kind: 'status', status: res.status, code: body?.code, retryAfterMs };
        error = fail((body?.code as FeedbackErrorCode | undefined) ?? 'unexpected_response', body?.message ?? `${method} ${path}: HTTP ${res.status}`, attempt, {
          status: res.status,
          details: body?.details,
          requestId,
          retryAfterMs,
        });
      }
      const step = nextStep({ attempt, outcome, policy: once ? { ...policy, maxAttempts: 1 } : policy, remainingMs: deadline - Date.now(), random });
      if (!step.retry) throw error;
      try {
        await sleep(step.delayMs, signal);
      } catch (cause) {
        throw fail('aborted', `${method} ${path}: aborted by the caller`, attempt, { cause });
      }
    }
  }

  const post = async <T>(path: string, body: unknown, callOptions: CallOptions = {}): Promise<T> => (await call('POST', path, body, callOptions)).json as T;
  const get = async <T>(path: string, callOptions: CallOptions = {}): Promise<T> => (await call('GET', path, undefined, callOptions)).json as T;
  const segment = (s: string) => encodeURIComponent(s);
  const admin = async <T>(method: 'GET' | 'POST' | 'DELETE', path: string, body: unknown, callOptions: CallOptions = {}, once = false): Promise<T> =>
    (await call(method, path, body, callOptions, true, once)).json as T;

  const client: FeedbackClient = {
    createRecord: (body, callOptions) => post<Accepted>('/feedback-record', body, callOptions),
    respond: (body, callOptions) => post<Accepted>('/feedback-response', body, callOptions),
    suggest: (body, callOptions) => post<SuggestionAccepted>('/feedback-suggestion', body, callOptions),
    createRecords: (items, callOptions) => post<BatchResult>('/feedback-batch', { items }, callOptions),
    erase: (body, callOptions) => post<ErasureAccepted>('/admin/erasures', body, callOptions),
    getErasure: (id, callOptions) => get<ErasureView>(`/admin/erasures/${segment(id)}`, callOptions),
    getRecord: (id, callOptions) => get<RecordView>(`/feedback-record/${segment(id)}`, callOptions),
    listRecords: (datasetId, query = {}, callOptions) => get<RecordPage>(`/datasets/${segment(datasetId)}/records${queryString(query)}`, callOptions),
    async *iterateRecords(datasetId, query = {}, callOptions) {
      let cursor: string | undefined;
      do {
        const page = await client.listRecords(datasetId, cursor === undefined ? query : { ...query, cursor }, callOptions);
        yield* page.items;
        cursor = page.next_cursor ?? undefined;
      } while (cursor !== undefined);
    },
    createWebhook: (body, callOptions) => admin<WebhookEndpointCreated>('POST', '/admin/webhooks', body, callOptions, true),
    listWebhooks: (callOptions) => admin<WebhookEndpointList>('GET', '/admin/webhooks', undefined, callOptions),
    deleteWebhook: (id, callOptions) => admin<WebhookEndpointDeleted>('DELETE', `/admin/webhooks/${segment(id)}`, undefined, callOptions),
    testWebhook: (id, callOptions) => admin<WebhookPing>('POST', `/admin/webhooks/${segment(id)}/test`, undefined, callOptions, true),
    listWebhookDeliveries: (id, query = {}, callOptions) => admin<WebhookDeliveryList>('GET', `/admin/webhooks/${segment(id)}/deliveries${queryString(query)}`, undefined, callOptions),
    replayWebhookDeliveries: (id, callOptions) => admin<WebhookReplay>('POST', `/admin/webhooks/${segment(id)}/replay`, undefined, callOptions),
    getAgreement: (datasetId, query, callOptions) => get<Agreement>(`/datasets/${segment(datasetId)}/agreement${queryString(query)}`, callOptions),
    getRecordHistory: (id, callOptions) => get<RecordHistory>(`/feedback-record/${segment(id)}/history`, callOptions),
    getProgress: (datasetId, callOptions) => get<Progress>(`/datasets/${segment(datasetId)}/progress`, callOptions),
    async *exportRecords(datasetId, callOptions = {}, filters = {}) {
      const { res } = await call('GET', `/datasets/${segment(datasetId)}/export${queryString(filters)}`, undefined, callOptions, false);
      if (res.body === null) return;
      for await (const value of ndjsonValues(res.body as unknown as AsyncIterable<Uint8Array>)) yield value as RecordView;
    },
  };
  return client;
}
