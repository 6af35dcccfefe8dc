import { expect } from 'chai';
import { Redis } from 'ioredis';
import { TransientStoreError } from '../../worker/errors.js';
import { createFanOutLock } from '../../worker/fan-out-lock.js';

describe('fan-out lock: Redis unreachable', () => {
  it('is an outage for the caller (TransientStoreError: its job runs again without using an attempt), and fn does not run', async () => {
    // Port 9 (discard): nothing listens; no offline queue, so the command fails at once.
    const redis = new Redis({ port: 9, lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null });
    const lock = createFanOutLock({ redis, key: 'fan-out-lock-test' });
    let ran = false;
    const run = async () => {
      ran = true;
    };
    try {
      for (const attempt of [() => lock.with(run), () => lock.tryWith(run)]) {
        const err = await attempt().then(() => undefined, (e: unknown) => e);
        expect(err).to.be.instanceOf(TransientStoreError);
      }
      expect(ran).to.equal(false);
    } finally {
      redis.disconnect();
    }
  });
});
