import { createServer, connect, type Server, type Socket } from 'node:net';

/** A TCP proxy on loopback that holds every chunk, both ways, for a random time. */
export interface DelayProxy {
  readonly port: number;
  close(): Promise<void>;
}

/**
 * Forwards connections on a free port to `targetPort`, holding each chunk for 0 to `maxDelayMs`
 * ms (a fresh draw per chunk; order within a direction kept). Commands of several clients then
 * reach the server, and their replies the clients, in orders that plain loopback never shows.
 */
export async function startDelayProxy(targetPort: number, maxDelayMs: number, random: () => number = Math.random): Promise<DelayProxy> {
  const sockets = new Set<Socket>();
  const pipeDelayed = (from: Socket, to: Socket) => {
    let chain = Promise.resolve();
    from.on('data', (chunk: Buffer) => {
      const delay = random() * maxDelayMs;
      chain = chain.then(() => new Promise<void>((resolve) => setTimeout(resolve, delay))).then(() => {
        if (!to.destroyed) to.write(chunk);
      });
    });
    from.on('end', () => void chain.then(() => to.end()));
    from.on('error', () => to.destroy());
    from.on('close', () => void chain.then(() => to.destroy()));
  };
  const server: Server = createServer((client) => {
    const upstream = connect(targetPort, '127.0.0.1');
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
    }
    pipeDelayed(client, upstream);
    pipeDelayed(upstream, client);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
