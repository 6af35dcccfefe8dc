import { expect } from 'chai';
import type { MongoClient } from 'mongodb';
import { createLogger } from '../../shared/logger.js';
import { createStoreReconnector } from '../../worker/store-reconnect.js';

describe('store reconnector: a new MongoDB topology after a long run of failed store rounds', () => {
  let t: number;
  const calls: string[] = [];
  let connectFailures: number;
  const client = {
    close: () => {
      calls.push('close');
      return Promise.resolve();
    },
    connect: () => {
      calls.push('connect');
      if (connectFailures > 0) {
        connectFailures--;
        return Promise.reject(new Error('server selection timed out'));
      }
      return Promise.resolve(client);
    },
  } as unknown as MongoClient;
  const logger = createLogger({ level: 'silent', name: 'test' });
  const settle = async (ms = 0) => new Promise((r) => setTimeout(r, ms));
  beforeEach(() => {
    t = 0;
    calls.length = 0;
    connectFailures = 0;
  });

  it('reconnects once failures have lasted afterMs, not before, and not again while one runs', async () => {
    const r = createStoreReconnector({ client, logger, afterMs: 20_000, now: () => t });
    r.failed();
    t = 19_999;
    r.failed();
    expect(calls).to.deep.equal([]);
    t = 20_000;
    r.failed();
    r.failed();
    await settle();
    expect(calls).to.deep.equal(['close', 'connect']);
    await r.close();
  });

  it('a success in between starts the count again', async () => {
    const r = createStoreReconnector({ client, logger, afterMs: 20_000, now: () => t });
    r.failed();
    t = 15_000;
    r.succeeded();
    r.failed();
    t = 30_000;
    r.failed();
    await settle();
    expect(calls).to.deep.equal([]);
    t = 35_000;
    r.failed();
    await settle();
    expect(calls).to.deep.equal(['close', 'connect']);
    await r.close();
  });

  it('keeps connecting until the store answers', async () => {
    connectFailures = 2;
    const r = createStoreReconnector({ client, logger, afterMs: 1, now: () => t });
    r.failed();
    t = 1;
    r.failed();
    // Two failed connects, a second apart, then one that answers (polled, at most 5 s).
    for (let waited = 0; calls.length < 4 && waited < 5_000; waited += 50) await settle(50);
    expect(calls).to.deep.equal(['close', 'connect', 'connect', 'connect']);
    await r.close();
  });
});
