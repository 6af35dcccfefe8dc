/**
 * How long a test run may still be held after its last test, ms. mocha runs without --exit, so a
 * handle a test left open shows as a run that does not end: a client still reconnecting to the
 * stopped servers, or a timer. Past this the run names what still holds it and ends, with mocha's
 * own exit status, instead of waiting for CI's time limit.
 */
const HELD_AFTER_RUN_MS = 30_000;

/** Call from the global teardown (test/helpers/root-hooks.ts): the timer is unreferenced, so it fires only while something else still holds the event loop. */
export function endRunIfHeld(): void {
  setTimeout(() => {
    const held = process.getActiveResourcesInfo().filter((r) => r !== 'TTYWrap');
    process.stderr.write(`test run: still held ${HELD_AFTER_RUN_MS / 1000} s after the last test by ${JSON.stringify(held)} (a handle a test left open); ending the run\n`);
    process.exit();
  }, HELD_AFTER_RUN_MS).unref();
}
