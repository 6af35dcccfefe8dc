import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A receiver of webhook deliveries on loopback: answers 200 to every request, counts them and keeps the distinct `webhook-id`s. */
export interface BenchReceiver {
  readonly url: string;
  /** Requests received so far (retries included). */
  received(): number;
  /** Distinct `webhook-id`s received since the last clear (every event delivered once it holds as many as the outbox). */
  readonly ids: Set<string>;
  close(): void;
}

export function startBenchReceiver(): Promise<BenchReceiver> {
  return new Promise((resolve) => {
    let received = 0;
    const ids = new Set<string>();
    const server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        received++;
        ids.add(String(req.headers['webhook-id']));
        res.writeHead(200).end();
      });
    });
    // Never keeps the bench alive.
    server.unref();
    server.listen(0, '127.0.0.1', () =>
      resolve({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, received: () => received, ids, close: () => server.close() }),
    );
  });
}

/** A receiver started on first use (design project_webhook of `npm run bench`). */
export function webhookReceiver(): () => Promise<BenchReceiver> {
  let started: Promise<BenchReceiver> | undefined;
  return () => (started ??= startBenchReceiver());
}
