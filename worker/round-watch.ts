import type { Logger } from '../shared/logger.js';
import { TransientStoreError } from './errors.js';

/*
 * The watch over one store round of the writer (worker/writer.ts): a round running long is logged
 * with the step it waits in, and a round that stays in one step of its own (a store call, not a
 * wait for the rounds before it) past its deadline is given up as an outage, so that a store call
 * that never settles cannot hold every later round, which take turns behind it (docs/reliability.md).
 */

/** A store round running this long is logged (and again every as long) with the step it waits in. */
export const ROUND_WATCH_MS = 30_000;
/** Default deadline of a store step (the writer's `roundDeadlineMs`). */
export const ROUND_DEADLINE_MS = 60_000;

/** A store round that did not settle within its deadline: its jobs wait and run again, as in an outage. */
export class RoundDeadlineError extends TransientStoreError {
  constructor(ms: number, step: string) {
    super(new Error(`store round did not settle within ${ms} ms (waiting in step: ${step})`));
    this.name = 'RoundDeadlineError';
  }
}

/** Where a store round is: for the log of one that runs long, and its deadline. */
export interface RoundStep {
  /** Entering a step of the round's own (a store call): the deadline counts from now. */
  enter(step: string): void;
  /** Waiting for the rounds before it (their own deadlines bound that), not for the store. */
  wait(step: string): void;
}

/**
 * Runs one round under the watch. Rejects with {@link RoundDeadlineError} once a step of its own
 * has lasted `deadlineMs`; the round itself may still settle later, and what it then writes is
 * guarded like any late write (by `seq`).
 */
export function watchRound<T>(options: { readonly logger: Logger; readonly deadlineMs: number; readonly writes: number }, run: (at: RoundStep) => Promise<T>): Promise<T> {
  const { logger, deadlineMs } = options;
  let step = 'start';
  let since = Date.now();
  let waiting = false;
  const at: RoundStep = {
    enter(s) {
      [step, since, waiting] = [s, Date.now(), false];
    },
    wait(s) {
      [step, since, waiting] = [s, Date.now(), true];
    },
  };
  const startedAt = Date.now();
  let lastWarned = startedAt;
  let giveUp!: (err: Error) => void;
  const givenUp = new Promise<never>((_, reject) => (giveUp = reject));
  const watch = setInterval(() => {
    const now = Date.now();
    if (!waiting && now - since >= deadlineMs) {
      logger.error({ running_ms: now - startedAt, step }, 'store round given up: a store call did not settle; its jobs run again');
      giveUp(new RoundDeadlineError(deadlineMs, step));
    } else if (now - lastWarned >= ROUND_WATCH_MS) {
      lastWarned = now;
      logger.warn({ writes: options.writes, running_ms: now - startedAt, step }, 'store round still running');
    }
  }, Math.max(10, Math.min(ROUND_WATCH_MS, deadlineMs) / 4));
  watch.unref();
  const running = run(at);
  running.catch(() => undefined);
  return Promise.race([running, givenUp]).finally(() => clearInterval(watch));
}
