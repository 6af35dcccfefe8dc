import type { Cluster } from './cluster.js';
import type { Ledger } from './ledger.js';

/** What a fault test holds: set inside the test, closed after it whatever its outcome. */
export interface FaultScope {
  cluster: Cluster | undefined;
  ledger: Ledger | undefined;
}

/** Registers, in the calling `describe`, the `afterEach` that closes each test's ledger and cluster. */
export function faultScope(): FaultScope {
  const scope: FaultScope = { cluster: undefined, ledger: undefined };
  afterEach(async function () {
    this.timeout(60_000);
    scope.ledger?.close();
    scope.ledger = undefined;
    await scope.cluster?.close();
    scope.cluster = undefined;
  });
  return scope;
}
