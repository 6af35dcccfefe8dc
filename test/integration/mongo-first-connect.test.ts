import { expect } from 'chai';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { freePort } from '../../devkit/servers.js';
import { createMongo } from '../../shared/mongo.js';
import { sharedServices } from '../helpers/root-hooks.js';
import { eventually } from '../helpers/stack.js';

/** Forwards `port` to `target` from now on (the store "comes up" on `port`). */
async function forward(port: number, target: number): Promise<{ close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect(target, '127.0.0.1');
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => undefined);
    }
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

describe('a MongoDB client created while the store is down (shared/mongo.ts createMongo)', () => {
  it('reaches the store once it is up: no "Topology is closed" for good after a failed first connect', async () => {
    const port = await freePort();
    const mongo = createMongo({ mongodbUri: `mongodb://127.0.0.1:${port}/first_connect`, mongodbDatabase: 'first_connect', mongodbTimeoutMs: 300, mongodbWriteConcern: 'server', mongodbJournal: false, mongodbReadPreference: 'primary' });
    const col = mongo.db.collection('probe');
    let store: { close(): Promise<void> } | undefined;
    try {
      // Down: the first operations fail (the driver's first connect fails with them).
      const err = await col.findOne({}).then(() => undefined, (e: unknown) => e as Error);
      expect(err, 'an operation while the store is down').to.be.instanceOf(Error);
      await new Promise((r) => setTimeout(r, 500));
      store = await forward(port, Number(new URL(sharedServices().mongoUrl).port));
      await eventually(() => col.findOne({}).then(() => true, () => undefined), 20_000, 'an operation that succeeds once the store is up');
    } finally {
      await mongo.close();
      await store?.close();
    }
  });
});
