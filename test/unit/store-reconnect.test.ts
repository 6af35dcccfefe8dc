import { expect } from 'chai';
import type { MongoClient } from 'mongodb';
import { createLogger } from '../../shared/logger.js';
import { createStoreReconnector, type StoreReconnector } from '../../worker/store-reconnect.js';

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
  /** The worker's own client fails too (the state the reconnect is for). */
  const stuck = () => Promise.resolve(false);
  beforeEach(() => {
    t = 0;
    calls.length = 0;
    connectFailures = 0;
  });

  /** A reconnector on the fake client and clock, afterMs 20 s: the store answers, the worker's client does not, unless overridden. */
  const reconnector = (over: Partial<Parameters<typeof createStoreReconnector>[0]> = {}) =>
    createStoreReconnector({ client, probe: () => Promise.resolve(true), clientAnswers: stuck, answerWaitMs: 0, logger, afterMs: 20_000, now: () => t, ...over });
  /** A store round fails at `ms` on the fake clock; then the reconnect it started, if any, has run. */
  const failAt = async (r: StoreReconnector, ms: number) => {
    t = ms;
    r.failed();
    await settle();
  };

  it('reconnects once failures have lasted afterMs, not before, and not again while one runs', async () => {
    const r = reconnector();
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
    const r = reconnector();
    r.failed();
    t = 15_000;
    r.succeeded();
    r.failed();
    await failAt(r, 30_000);
    expect(calls).to.deep.equal([]);
    await failAt(r, 35_000);
    expect(calls).to.deep.equal(['close', 'connect']);
    await r.close();
  });

  it('keeps a client that answers once the store is back; replaces it after a second full period of failed rounds, and a success in between starts over', async () => {
    let answers = true;
    const r = reconnector({ clientAnswers: () => Promise.resolve(answers) });
    r.failed();
    await failAt(r, 20_000);
    expect(calls, 'the client answers: kept').to.deep.equal([]);
    // Rounds still fail: another full period, and the client is replaced whatever it answers.
    await failAt(r, 20_001);
    await failAt(r, 40_000);
    expect(calls).to.deep.equal([]);
    await failAt(r, 40_001);
    expect(calls).to.deep.equal(['close', 'connect']);
    // A round that succeeds starts over: the next outage keeps an answering client again.
    calls.length = 0;
    r.succeeded();
    r.failed();
    await failAt(r, 60_001);
    expect(calls, 'kept again after a success').to.deep.equal([]);
    answers = false;
    r.succeeded();
    r.failed();
    await failAt(r, 80_001);
    expect(calls, 'a client that does not answer is replaced at once').to.deep.equal(['close', 'connect']);
    await r.close();
  });

  it('closes the client only once a separate connection reaches the store, then connects until it answers', async () => {
    let probes = 0;
    connectFailures = 1;
    const probe = () => {
      calls.push('probe');
      return Promise.resolve(++probes > 2);
    };
    const r = reconnector({ probe, afterMs: 1 });
    r.failed();
    t = 1;
    r.failed();
    // Two probes that fail, a second apart, one that answers; a connect that fails, one that answers (polled, at most 8 s).
    for (let waited = 0; calls.length < 6 && waited < 8_000; waited += 50) await settle(50);
    expect(calls).to.deep.equal(['probe', 'probe', 'probe', 'close', 'connect', 'connect']);
    await r.close();
  });
});
