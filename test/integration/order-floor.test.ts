import { createServer, connect, type Server, type Socket } from 'node:net';
import { expect } from 'chai';
import { MongoClient } from 'mongodb';
import { COLLECTIONS, createMongo, mongoClientOptions } from '../../shared/mongo.js';
import { createOrderClock, orderFloorAt, orderTime } from '../../shared/order-clock.js';
import { createLogger } from '../../shared/logger.js';
import { createOrderFloor } from '../../api/order-floor.js';
import { testConfig } from '../helpers/env.js';
import { sharedServices } from '../helpers/root-hooks.js';
import { eventually, recordBody, responses, startStack } from '../helpers/stack.js';

describe('acceptance order floor (persisted in MongoDB, survives Redis and restarts)', () => {
  it('an API starting behind the persisted floor (its clock stepped back) mints orders above it, and persists its own', async () => {
    const config = testConfig();
    const client = new MongoClient(config.mongodbUri, { ...mongoClientOptions(), retryWrites: false });
    const meta = client.db(config.mongodbDatabase).collection<{ _id: string; order: number }>(COLLECTIONS.meta);
    // As if an API, on a host whose clock ran an hour ahead, had accepted writes before.
    const floor = orderFloorAt(Date.now() + 3_600_000);
    await meta.insertOne({ _id: 'order_floor', order: floor });
    const stack = await startStack(config);
    try {
      const res = await stack.post('/feedback-record', recordBody());
      expect(res.status).to.equal(200);
      const doc = await eventually(async () => (await responses(stack.db).findOne({ _id: res.body.feedback_response_id })) ?? undefined, 15_000, 'response stored');
      expect(doc['seq']).to.be.greaterThan(floor);
      // The API persists what it minted (every second), so the next start begins above it.
      await eventually(async () => ((await meta.findOne({ _id: 'order_floor' }))!.order >= doc['seq'] ? true : undefined), 5_000, 'floor persisted');
    } finally {
      await stack.close();
      await client.close();
    }
  });
  it('an API starting while another persisted its floor a moment ago mints at its wall clock, not ahead: a write that process accepts after this one still outranks it', async () => {
    const config = testConfig();
    const client = new MongoClient(config.mongodbUri, { ...mongoClientOptions(), retryWrites: false });
    const db = client.db(config.mongodbDatabase);
    const meta = db.collection<{ _id: string; order: number }>(COLLECTIONS.meta);
    try {
      await meta.deleteOne({ _id: 'order_floor' });
      // As a live API process on the same clock leaves it: its newest order persisted 100 ms ago (a rolling restart of another one).
      await meta.insertOne({ _id: 'order_floor', order: orderFloorAt(Date.now() - 100) });
      const clock = createOrderClock({ node: 1 });
      const floor = createOrderFloor({ db, clock, logger: createLogger({ level: 'silent', name: 'order-floor-test' }), persistMs: 1_000 });
      await floor.start(10_000);
      const mine = clock.next();
      await floor.close();
      // The order the other process, at wall time, gives a write it accepts once this one is minted.
      const laterElsewhere = orderFloorAt(Date.now() + 1);
      expect(mine, `minted for ${new Date(orderTime(mine)).toISOString()}`).to.be.lessThan(laterElsewhere);
    } finally {
      await client.close();
    }
  });
  it('an API that could not read the floor at start (the store did not answer) reads it once the store answers, and mints above it from then on', async () => {
    const config = testConfig();
    const direct = new MongoClient(config.mongodbUri, { ...mongoClientOptions(), retryWrites: false });
    const meta = direct.db(config.mongodbDatabase).collection<{ _id: string; order: number }>(COLLECTIONS.meta);
    const floorOrder = orderFloorAt(Date.now() + 3_600_000);
    await meta.deleteOne({ _id: 'order_floor' });
    await meta.insertOne({ _id: 'order_floor', order: floorOrder });
    // The API's store address: nothing listens there yet.
    const free: Server = createServer();
    await new Promise<void>((resolve) => free.listen(0, '127.0.0.1', resolve));
    const port = (free.address() as { port: number }).port;
    await new Promise<void>((resolve) => free.close(() => resolve()));
    // As the API connects (shared/mongo.ts createMongo, which connects again until it can).
    const viaPort = createMongo({ ...config, mongodbUri: `mongodb://127.0.0.1:${port}`, mongodbTimeoutMs: 500 });
    const sockets = new Set<Socket>();
    let proxy: Server | undefined;
    const clock = createOrderClock({ node: 2 });
    const floor = createOrderFloor({ db: viaPort.db, clock, logger: createLogger({ level: 'silent', name: 'order-floor-test' }), persistMs: 200 });
    try {
      await floor.start(500);
      expect(clock.next(), 'started on its wall clock').to.be.lessThan(floorOrder);
      // The store answers from now on.
      const mongoPort = Number(new URL(sharedServices().mongoUrl).port);
      proxy = createServer((c) => {
        const upstream = connect(mongoPort, '127.0.0.1');
        for (const s of [c, upstream]) {
          sockets.add(s);
          s.on('error', () => undefined).on('close', () => sockets.delete(s));
        }
        c.pipe(upstream).pipe(c);
      });
      await new Promise<void>((resolve) => proxy!.listen(port, '127.0.0.1', resolve));
      await eventually(async () => (clock.next() > floorOrder ? true : undefined), 20_000, 'orders above the floor once it was read');
    } finally {
      await floor.close();
      for (const s of sockets) s.destroy();
      await viaPort.close();
      if (proxy !== undefined) await new Promise<void>((resolve) => proxy!.close(() => resolve()));
      await direct.close();
    }
  });
});
