import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { assertDevKeyOnLoopback, DEV_API_KEY_SECRET, DevKeyExposedError, isLoopbackHost } from '../../api/dev-key-guard.js';
import { loadConfig } from '../../shared/config.js';

describe('development key guard (api/dev-key-guard.ts)', () => {
  it('counts localhost, 127.0.0.0/8 and ::1 as loopback, and nothing else', () => {
    for (const host of ['localhost', 'LOCALHOST', '127.0.0.1', '127.8.9.10', '::1', '0:0:0:0:0:0:0:1', '::ffff:127.0.0.1']) expect(isLoopbackHost(host), host).to.equal(true);
    for (const host of ['0.0.0.0', '::', '10.0.0.5', '192.168.1.2', '::ffff:10.0.0.1', '128.0.0.1', 'example.com', 'localhost.example.com', '']) expect(isLoopbackHost(host), host).to.equal(false);
  });

  const guard = (env: Record<string, string>) => () => assertDevKeyOnLoopback(loadConfig(env));
  const digest = createHash('sha256').update(DEV_API_KEY_SECRET).digest('hex');

  it('refuses the development key, plain or as its sha256 digest, under any name, on a non-loopback HOST', () => {
    for (const keys of [`dev:${DEV_API_KEY_SECRET}`, `mine:${DEV_API_KEY_SECRET}`, `ops:own-secret-123,dev:sha256:${digest}`]) {
      for (const host of ['0.0.0.0', '::', '10.0.0.5']) {
        expect(guard({ API_KEYS: keys, HOST: host }), `${keys} on ${host}`).to.throw(DevKeyExposedError, /^refusing to start: .*HOST=.* is not a loopback address/);
      }
    }
  });

  it('refuses it on the default HOST (0.0.0.0, for platforms that route to the container)', () => {
    expect(guard({ API_KEYS: `dev:${DEV_API_KEY_SECRET}` })).to.throw(DevKeyExposedError);
  });

  it('allows it on loopback, and allows other keys anywhere', () => {
    expect(guard({ API_KEYS: `dev:${DEV_API_KEY_SECRET}`, HOST: '127.0.0.1' })).to.not.throw();
    expect(guard({ API_KEYS: `dev:${DEV_API_KEY_SECRET}`, HOST: '::1' })).to.not.throw();
    expect(guard({ API_KEYS: 'prod:a-key-of-our-own-42', HOST: '0.0.0.0' })).to.not.throw();
    expect(guard({ HOST: '0.0.0.0' })).to.not.throw();
  });

  it('says it in one line that names HOST and the way out, without the secret', () => {
    let message = '';
    try {
      guard({ API_KEYS: `dev:${DEV_API_KEY_SECRET}`, HOST: '0.0.0.0' })();
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).to.not.include('\n');
    expect(message).to.include('HOST=0.0.0.0').and.include('HOST=127.0.0.1').and.include('"dev"');
    expect(message).to.not.include(DEV_API_KEY_SECRET);
  });
});
