import { expect } from 'chai';
import { MongoClient, type Collection, type Db, type Document } from 'mongodb';
import { COLLECTIONS, mongoClientOptions } from '../../shared/mongo.js';
import { ensureIndexes } from '../../worker/indexes.js';
import { STORE_PROFILES, type StoreProfile } from '../../shared/store-profile.js';
import { createFeedbackWriter, type WriteResult } from '../../worker/writer.js';
import { uniqueName } from '../helpers/env.js';
import { sharedServices } from '../helpers/root-hooks.js';
import { silentLogger } from '../helpers/stack.js';
import { recordWrite, shuffled, version } from '../helpers/writes.js';

/**
 * The real store, with the responses collection's updates run the way FerretDB v1 runs them
 * (read the document, decide in the client, write by bare _id) but with `delayMs` between the
 * read and the write. FerretDB offers no hook to widen that window; here it is wide enough that
 * writers racing without a lease overwrite newer versions every time.
 */
function withUnlockedUpdates(db: Db, delayMs: number): Db {
  type Op = { updateOne: { filter: { _id: string; seq: { $lte: number } }; update: { $set: Record<string, unknown>; $setOnInsert: Record<string, unknown> }; upsert?: boolean } };
  const racy = (col: Collection<Document>) => {
    async function one(op: Op['updateOne']): Promise<{ matchedCount: number }> {
      const current = await col.findOne({ _id: op.filter._id as never });
      await new Promise((r) => setTimeout(r, delayMs));
      if (current !== null && (current['seq'] as number) <= op.filter.seq.$lte) {
        await col.updateOne({ _id: op.filter._id as never }, { $set: op.update.$set });
        return { matchedCount: 1 };
      }
      if (op.upsert !== true) return { matchedCount: 0 };
      await col.insertOne({ _id: op.filter._id, ...op.update.$setOnInsert, ...op.update.$set } as never);
      return { matchedCount: 0 };
    }
    return new Proxy(col, {
      get(target, prop, receiver) {
        if (prop === 'bulkWrite') return async (ops: Op[]) => { for (const o of ops) await one(o.updateOne); };
        if (prop === 'updateOne') return (filter: Op['updateOne']['filter'], update: Op['updateOne']['update'], options: { upsert?: boolean } = {}) => one({ filter, update, upsert: options.upsert === true });
        return Reflect.get(target, prop, receiver);
      },
    });
  };
  return new Proxy(db, {
    get(target, prop, receiver) {
      if (prop === 'collection') return (name: string) => (name === COLLECTIONS.responses ? racy(target.collection(name)) : target.collection(name));
      return Reflect.get(target, prop, receiver);
    },
  });
}

/** Three writers, each with its own client, racing on the same responses. */
async function raceThreeWriters(url: string, database: string, profile: StoreProfile, seed: number): Promise<string[]> {
  const clients = [1, 2, 3].map(() => new MongoClient(url, { ...mongoClientOptions() }));
  const ws = clients.map((c) => createFeedbackWriter({ db: c.db(database), logger: silentLogger, profile, leaseMs: 5_000 }));
  try {
    await ensureIndexes(clients[0]!.db(database));
    await ws[0]!.write([1, 2, 3, 4].map(recordWrite));
    const all = [1, 2, 3, 4].flatMap((r) => [1, 2, 3].flatMap((u) => Array.from({ length: 20 }, (_, v) => version(r, u, v + 1))));
    // Each writer gets every version (as when jobs are redelivered) in an order of its own, in
    // batches of 3: 80 store rounds each, all three racing on the same 12 responses.
    await Promise.all(ws.map(async (w, k) => {
      const order = shuffled(all, seed + k);
      for (let i = 0; i < order.length; i += 3) await w.write(order.slice(i, i + 3));
    }));
    const col = clients[0]!.db(database).collection<{ _id: string; values: Record<string, unknown> }>(COLLECTIONS.responses);
    const wrong: string[] = [];
    for (const r of [1, 2, 3, 4]) {
      for (const u of [1, 2, 3]) {
        const doc = await col.findOne({ _id: `rsp_${r}_${u}` });
        if (doc?.values['v'] !== 20) wrong.push(`rsp_${r}_${u}: v=${String(doc?.values['v'])}`);
      }
    }
    return wrong;
  } finally {
    for (const w of ws) w.close();
    await Promise.all(clients.map((c) => c.close()));
  }
}

describe('worker writers racing on the same responses (FerretDB: unlocked read-modify-write updates)', function () {
  this.timeout(180_000);
  const seed = Number(process.env['WRITER_RACE_SEED'] ?? Date.now() % 100_000);

  it('on FerretDB/SQLite (the store of the tests): three writers leave the newest version of every response', async () => {
    const wrong = await raceThreeWriters(sharedServices().mongoUrl, uniqueName('race').replace(/-/g, '_'), STORE_PROFILES.ferretdb, seed);
    expect(wrong, `replay with WRITER_RACE_SEED=${seed}`).to.deep.equal([]);
  });

  it('with a window between the read and the write of every update: the newest version wins over older ones whose window spans its write', async () => {
    const url = sharedServices().mongoUrl;
    const database = uniqueName('window').replace(/-/g, '_');
    // Writer k reads, waits windows[k] ms, writes: the older a version, the wider its window, so
    // without mutual exclusion an older one reads before the newest lands and writes after it.
    const windows = [20, 45, 70];
    const clients = windows.map(() => new MongoClient(url, { ...mongoClientOptions() }));
    const ws = clients.map((c, k) => createFeedbackWriter({ db: withUnlockedUpdates(c.db(database), windows[k]!), logger: silentLogger, profile: STORE_PROFILES.ferretdb, leaseMs: 5_000 }));
    try {
      await ensureIndexes(clients[0]!.db(database));
      // Every writer stores (or finds) the records, so none needs a lookup that would delay its start.
      for (const w of ws) await w.write([1, 2, 3, 4].map(recordWrite));
      await ws[0]!.write([1, 2, 3, 4].flatMap((r) => [1, 2, 3].map((u) => version(r, u, 1))));
      // At once: writer 0 stores version 20 of all twelve responses, writers 1 and 2 versions 19 and 18.
      const results = await Promise.all(ws.map(async (w, k) => {
        let todo = [1, 2, 3, 4].flatMap((r) => [1, 2, 3].map((u) => version(r, u, 20 - k)));
        const done: WriteResult['kind'][] = [];
        // A response another writer holds comes back busy: the processor retries such a job shortly.
        while (todo.length > 0) {
          const out = await w.write(todo);
          done.push(...out.filter((o) => o.kind !== 'busy').map((o) => o.kind));
          todo = todo.filter((_, i) => out[i]!.kind === 'busy');
        }
        return done;
      }));
      const col = clients[0]!.db(database).collection<{ _id: string; values: Record<string, unknown> }>(COLLECTIONS.responses);
      const values = (await col.find({}).toArray()).filter((d) => !d._id.startsWith('rsp_first')).map((d) => d.values['v']);
      expect(values).to.have.length(12);
      expect(values.filter((v) => v !== 20), 'responses left at an older version').to.deep.equal([]);
      // The newest is stored for every response; an older one may be stored first and replaced.
      expect(results[0]!.every((k) => k === 'stored')).to.equal(true);
    } finally {
      for (const w of ws) w.close();
      await Promise.all(clients.map((c) => c.close()));
      await new MongoClient(url).connect().then(async (c) => { await c.db(database).dropDatabase(); await c.close(); });
    }
  });
});
