// Peer (raw): what one Node process can parse and answer with nothing but node:http. It reads the
// body, checks the bearer token, JSON.parse()s, checks the top-level shape and answers 200 with
// two fresh ids. No queue, no log, no validation beyond the shape: the ceiling of any Node API.
// Reads PORT, HOST and API_KEYS (`name:secret,…`); `GET /elu` answers the event-loop utilisation
// counters (ms idle and active since start) so that the benchmark can report it per run.
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';

const port = Number(process.env['PORT'] ?? 3000);
const host = process.env['HOST'] ?? '127.0.0.1';
const tokens = new Set((process.env['API_KEYS'] ?? '').split(',').map((pair) => pair.slice(pair.indexOf(':') + 1)));
const LIMIT = 1024 * 1024;

const isObject = (x: unknown): x is Record<string, unknown> => typeof x === 'object' && x !== null && !Array.isArray(x);

function shapeOk(path: string, body: unknown): boolean {
  if (!isObject(body) || !isObject(body['response']) || !isObject(body['response']['values'])) return false;
  if (path === '/feedback-record') return isObject(body['record']) && typeof body['record']['feedback_dataset_id'] === 'string';
  return typeof body['feedback_record_id'] === 'string';
}

function answer(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function handle(req: IncomingMessage, res: ServerResponse): void {
  const path = req.url ?? '';
  if (req.method === 'GET' && path === '/elu') {
    const { idle, active } = performance.eventLoopUtilization();
    answer(res, 200, { idle, active });
    return;
  }
  if (req.method !== 'POST' || (path !== '/feedback-record' && path !== '/feedback-response')) {
    answer(res, 404, { error: { code: 'not_found' } });
    return;
  }
  const auth = req.headers.authorization ?? '';
  if (!auth.startsWith('Bearer ') || !tokens.has(auth.slice(7))) {
    req.resume();
    answer(res, 401, { error: { code: 'unauthorized' } });
    return;
  }
  const chunks: Buffer[] = [];
  let size = 0;
  req.on('data', (chunk: Buffer) => {
    size += chunk.length;
    if (size <= LIMIT) chunks.push(chunk);
  });
  req.on('end', () => {
    if (size > LIMIT) return answer(res, 413, { error: { code: 'payload_too_large' } });
    let body: unknown;
    try {
      body = JSON.parse(Buffer.concat(chunks, size).toString('utf8'));
    } catch {
      return answer(res, 400, { error: { code: 'invalid_json' } });
    }
    if (!shapeOk(path, body)) return answer(res, 400, { error: { code: 'validation_failed' } });
    const status = (body as { response: { status?: unknown } }).response.status ?? 'submitted';
    answer(res, 200, { feedback_record_id: randomUUID(), feedback_response_id: randomUUID(), status });
  });
}

const server = createServer(handle);
server.listen(port, host);
const stop = () => server.close(() => process.exit(0));
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
