import { createHash, timingSafeEqual } from 'node:crypto';
import { BlockList, isIP } from 'node:net';
import type { Config } from '../shared/config.js';

/**
 * The development key that `npm start` configures when `API_KEYS` is unset. Its secret is
 * printed in the README, so it is safe only where nobody else can connect: on loopback.
 * `scripts/start.sh` writes the same secret (the start-script test signs in with this one).
 */
export const DEV_API_KEY_SECRET = 'dev-secret-key-change-me';

const DEV_KEY_DIGEST = createHash('sha256').update(DEV_API_KEY_SECRET, 'utf8').digest();

const LOOPBACK = new BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');

/**
 * True when `host` accepts connections from this machine only: `localhost`, 127.0.0.0/8, `::1`
 * (and IPv4-mapped 127.x). `0.0.0.0` and `::` are every interface, so not loopback.
 */
export function isLoopbackHost(host: string): boolean {
  if (host.toLowerCase() === 'localhost') return true;
  const family = isIP(host);
  if (family === 0) return false;
  return LOOPBACK.check(host, family === 6 ? 'ipv6' : 'ipv4');
}

/** The API was told to serve the development key on an address others can reach. */
export class DevKeyExposedError extends Error {
  constructor(keyName: string, host: string) {
    super(
      `refusing to start: API_KEYS holds the development key "${keyName}" (secret printed in the README) and HOST=${host} is not a loopback address; ` +
        'set API_KEYS to keys of your own, or HOST=127.0.0.1',
    );
    this.name = 'DevKeyExposedError';
  }
}

/** Throws {@link DevKeyExposedError} when a key of `API_KEYS` has the development secret (plain or `sha256:`) and HOST is not loopback. */
export function assertDevKeyOnLoopback(config: Pick<Config, 'apiKeys' | 'host'>): void {
  if (isLoopbackHost(config.host)) return;
  const dev = config.apiKeys.find((key) => timingSafeEqual(key.digest, DEV_KEY_DIGEST));
  if (dev !== undefined) throw new DevKeyExposedError(dev.name, config.host);
}
