import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A receiver of webhook deliveries on loopback, started on first use: answers 200 to every request and counts them. */
export function webhookReceiver(): () => Promise<{ readonly url: string; readonly received: () => number }> {
  let started: Promise<{ url: string; received: () => number }> | undefined;
  return () =>
    (started ??= new Promise((resolve) => {
      let received = 0;
      const server = createServer((req, res) => {
        req.resume();
        req.on('end', () => {
          received++;
          res.writeHead(200).end();
        });
      });
      // Never keeps the bench alive.
      server.unref();
      server.listen(0, '127.0.0.1', () => resolve({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, received: () => received }));
    }));
}
