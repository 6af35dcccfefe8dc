import { createServer, connect, type Server, type Socket } from 'node:net';
import { expect } from 'chai';
import { BSON } from 'mongodb';
import { COLLECTIONS } from '../../shared/mongo.js';
import { sharedServices } from '../helpers/root-hooks.js';
import { testConfig } from '../helpers/env.js';
import { deadLetters, eventually, recordBody, records, responses, startStack, type Stack } from '../helpers/stack.js';

const OP_MSG = 2013;
/** Only the worker's writes are refused (not the API's order-floor updates). */
const FEEDBACK_COLLECTIONS = [COLLECTIONS.records, COLLECTIONS.responses] as readonly string[];

/**
 * A TCP proxy in front of the real store that answers the next `budget` inserts and updates of
 * feedback records and responses itself with the reply a replica-set member gives during an election: `{ok: 0, code:
 * 10107, codeName: "NotWritablePrimary"}`. Everything else passes through unchanged. FerretDB has
 * no replica set, so this is how a genuine server error reply reaches the driver here.
 */
async function electionProxy(target: { host: string; port: number }): Promise<{ port: number; refuseWrites(budget: number): void; refused(): number; close(): Promise<void> }> {
  let budget = 0;
  let refused = 0;
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect(target.port, target.host);
    sockets.add(client).add(upstream);
    upstream.on('data', (chunk) => client.write(chunk));
    let pending = Buffer.alloc(0);
    client.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      while (pending.length >= 4 && pending.length >= pending.readInt32LE(0)) {
        const message = pending.subarray(0, pending.readInt32LE(0));
        pending = pending.subarray(message.length);
        const doc = message.readInt32LE(12) === OP_MSG && message[20] === 0 ? BSON.deserialize(message.subarray(21, 21 + message.readInt32LE(21))) : {};
        const command = Object.keys(doc)[0];
        const feedbackWrite = (command === 'insert' || command === 'update') && FEEDBACK_COLLECTIONS.includes(String(doc[command]));
        if (feedbackWrite && budget > 0) {
          budget--;
          refused++;
          const body = BSON.serialize({ ok: 0, errmsg: 'not primary', code: 10107, codeName: 'NotWritablePrimary' });
          const reply = Buffer.alloc(21 + body.length);
          reply.writeInt32LE(reply.length, 0);
          reply.writeInt32LE(0x7fff0000 + refused, 4);
          reply.writeInt32LE(message.readInt32LE(4), 8);
          reply.writeInt32LE(OP_MSG, 12);
          reply.writeUInt32LE(0, 16);
          reply[20] = 0;
          Buffer.from(body).copy(reply, 21);
          client.write(reply);
        } else upstream.write(message);
      }
    });
    const end = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('close', end).on('error', end);
    upstream.on('close', end).on('error', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  return {
    port: typeof address === 'object' && address !== null ? address.port : 0,
    refuseWrites(n) {
      budget = n;
    },
    refused: () => refused,
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('store election (NotWritablePrimary replies from the store)', () => {
  let stack: Stack | undefined;
  let proxy: Awaited<ReturnType<typeof electionProxy>> | undefined;

  after(async () => {
    await stack?.close();
    await proxy?.close();
  });

  it('pauses the queue, uses no attempt, dead-letters nothing, and stores every write once the store answers again', async function () {
    this.timeout(60_000);
    const store = new URL(sharedServices().mongoUrl);
    proxy = await electionProxy({ host: store.hostname, port: Number(store.port) });
    const base = testConfig({ JOB_ATTEMPTS: '1', STORE_RETRY_MAX_DELAY_MS: '200' });
    // The service talks to the store through the proxy; the test reads the store directly.
    stack = await startStack(testConfig({ JOB_ATTEMPTS: '1', STORE_RETRY_MAX_DELAY_MS: '200', MONGODB_URI: `mongodb://127.0.0.1:${proxy.port}/${base.mongodbDatabase}`, QUEUE_NAME: base.queueName }));

    proxy.refuseWrites(4);
    const answers = await Promise.all(Array.from({ length: 6 }, (_, i) => stack!.post('/feedback-record', recordBody({ record: { external_id: `election-${i}` } }))));
    for (const a of answers) expect(a.status).to.equal(200);
    const db = stack.db;
    // A record is stored one command before its response: wait for both, then compare.
    const stored = async () => ({
      records: await records(db).countDocuments({ _id: { $in: answers.map((a) => a.body.feedback_record_id) } }),
      responses: await responses(db).countDocuments({ _id: { $in: answers.map((a) => a.body.feedback_response_id) } }),
    });
    await eventually(async () => {
      const n = await stored();
      return n.records === answers.length && n.responses === answers.length ? true : undefined;
    }, 30_000, 'every record and response stored');
    expect(proxy.refused(), 'the store refused writes as during an election').to.equal(4);
    // JOB_ATTEMPTS=1: had an election error used an attempt, the job would have failed for good.
    expect(await deadLetters(db).countDocuments({})).to.equal(0);
    expect(await stack.api.queue.getJobCountByTypes('failed')).to.equal(0);
    const retries = (await stack.worker!.metrics.registry.getSingleMetric('feedback_worker_store_retries_total')?.get())?.values[0]?.value ?? 0;
    expect(retries, 'the worker paused the queue instead').to.be.at.least(1);
  });
});
