import { request, type Agent, type ClientRequest, type IncomingHttpHeaders } from 'node:http';

export interface HttpAnswer {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly text: string;
  /** The body parsed as JSON, or undefined. */
  readonly json: unknown;
}

/**
 * A request that got no answer. `sent` is false only when the connection was never established
 * (ECONNREFUSED): then the server cannot have seen the request. Otherwise the outcome is unknown.
 */
export class NoAnswer extends Error {
  readonly sent: boolean;
  readonly code: string | undefined;
  constructor(message: string, sent: boolean, code: string | undefined) {
    super(message);
    this.name = 'NoAnswer';
    this.sent = sent;
    this.code = code;
  }
}

interface SendOptions {
  readonly method?: string;
  readonly headers?: Readonly<Record<string, string | readonly string[]>>;
  readonly body?: string | Buffer;
  readonly agent?: Agent | false;
  /** Gives up (unknown outcome) after this long, ms. Default 20000. */
  readonly timeoutMs?: number;
}

/** One HTTP request with node:http, so that connection failures are told apart from lost answers. */
export function send(baseUrl: string, path: string, options: SendOptions = {}): Promise<HttpAnswer> {
  const url = new URL(path, baseUrl);
  return new Promise<HttpAnswer>((resolve, reject) => {
    let connected = false;
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname + url.search,
        method: options.method ?? 'POST',
        headers: options.headers as Record<string, string | string[]> | undefined,
        agent: options.agent ?? false,
        timeout: options.timeoutMs ?? 20_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', (err) => reject(new NoAnswer(`response broke: ${err.message}`, true, (err as NodeJS.ErrnoException).code)));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let json: unknown;
          try {
            json = text === '' ? undefined : JSON.parse(text);
          } catch {
            json = undefined;
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json });
        });
      },
    );
    req.on('socket', (socket) => {
      if (!socket.connecting) connected = true;
      else socket.once('connect', () => (connected = true));
    });
    req.on('timeout', () => req.destroy(Object.assign(new Error('request timed out'), { code: 'ETIMEDOUT_CLIENT' })));
    req.on('error', (err: NodeJS.ErrnoException) => {
      const sent = connected || err.code !== 'ECONNREFUSED';
      reject(new NoAnswer(err.message, sent, err.code));
    });
    req.end(options.body);
  });
}

/** The documented error body, or undefined when `json` does not have that shape. */
export function errorShape(json: unknown): { code: string; message: string; details?: unknown } | undefined {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) return undefined;
  const keys = Object.keys(json);
  if (keys.length !== 1 || keys[0] !== 'error') return undefined;
  const err = (json as { error: unknown }).error;
  if (typeof err !== 'object' || err === null || Array.isArray(err)) return undefined;
  const e = err as Record<string, unknown>;
  const allowed = new Set(['code', 'message', 'details']);
  if (!Object.keys(e).every((k) => allowed.has(k))) return undefined;
  if (typeof e['code'] !== 'string' || typeof e['message'] !== 'string') return undefined;
  if ('details' in e) {
    const d = e['details'];
    if (!Array.isArray(d) || !d.every((x) => typeof x === 'object' && x !== null && typeof (x as Record<string, unknown>)['path'] === 'string' && typeof (x as Record<string, unknown>)['message'] === 'string')) return undefined;
  }
  return e as { code: string; message: string; details?: unknown };
}

/**
 * The answer to `req` (a request the caller drives itself: held, slow), or a NoAnswer when the
 * connection broke first. Never rejects.
 */
export function answerOf(req: ClientRequest): Promise<HttpAnswer | NoAnswer> {
  return new Promise<HttpAnswer | NoAnswer>((resolve) => {
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (ch: Buffer) => chunks.push(ch));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json: unknown;
        try {
          json = JSON.parse(text);
        } catch {
          json = undefined;
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json });
      });
    });
    req.on('error', (err: NodeJS.ErrnoException) => resolve(new NoAnswer(err.message, true, err.code)));
  });
}
