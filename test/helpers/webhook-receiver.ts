import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One request the receiver got, in arrival order. */
export interface ReceivedWebhook {
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
  /** The status it answered. */
  readonly status: number;
}

/**
 * A real local HTTP endpoint for webhook tests: records every request and answers what
 * `answer` says (default 200). `stop()` closes the port (deliveries then fail to connect) and
 * `start()` listens again on the same port.
 */
export interface WebhookReceiver {
  readonly url: string;
  readonly received: ReceivedWebhook[];
  answer: (body: string, headers: IncomingHttpHeaders) => number;
  stop(): Promise<void>;
  start(): Promise<void>;
  close(): Promise<void>;
}

export async function startWebhookReceiver(path = '/hook'): Promise<WebhookReceiver> {
  let port = 0;
  let server: Server | undefined;
  const received: ReceivedWebhook[] = [];
  const receiver: WebhookReceiver = {
    url: '',
    received,
    answer: () => 200,
    async start() {
      const s = createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => {
          const body = Buffer.concat(chunks).toString('utf8');
          const status = receiver.answer(body, req.headers);
          received.push({ headers: req.headers, body, status });
          res.writeHead(status, { 'Content-Type': 'text/plain' }).end('ok');
        });
      });
      s.keepAliveTimeout = 1;
      await new Promise<void>((resolve, reject) => {
        s.once('error', reject);
        s.listen(port, '127.0.0.1', () => resolve());
      });
      port = (s.address() as AddressInfo).port;
      server = s;
    },
    async stop() {
      const s = server;
      server = undefined;
      if (s === undefined) return;
      s.closeAllConnections();
      await new Promise<void>((resolve) => s.close(() => resolve()));
    },
    close: () => receiver.stop(),
  };
  await receiver.start();
  (receiver as { url: string }).url = `http://127.0.0.1:${port}${path}`;
  return receiver;
}
