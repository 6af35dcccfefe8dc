import { expect } from 'chai';
import { createServer, type Server } from 'node:net';
import { freePort, startPostgresCluster, waitForPort } from '../../devkit/servers.js';

/**
 * The private PostgreSQL of the tests and `npm start`'s store: a port taken between its choice and
 * PostgreSQL's bind (initdb runs in between) makes it try another one, not fail the run.
 */
describe('private PostgreSQL: a port taken before the cluster binds it', function () {
  this.timeout(180_000);
  let taken: Server | undefined;
  afterEach(() => {
    taken?.close();
  });

  it('starts on another port', async () => {
    const takenPort = await freePort();
    taken = createServer().listen(takenPort, '127.0.0.1');
    await waitForPort(takenPort);
    const offered: number[] = [];
    const cluster = await startPostgresCluster({
      choosePort: async () => {
        const port = offered.length === 0 ? takenPort : await freePort();
        offered.push(port);
        return port;
      },
    });
    try {
      expect(offered.length, 'ports tried').to.equal(2);
      expect(cluster.port).to.equal(offered[1]);
      await waitForPort(cluster.port);
    } finally {
      await cluster.destroy();
    }
  });
});
