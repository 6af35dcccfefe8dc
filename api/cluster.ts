import type { Cluster, Worker } from 'node:cluster';
import type { Logger } from '../shared/logger.js';
import { clusterOrderNodes } from '../shared/order-clock.js';

/** Replacing a process that died: the first delay, doubled per death in a row up to the cap, ms. */
export const RESTART_DELAY_MS = 100;
export const RESTART_MAX_DELAY_MS = 10_000;
/** A process that ran this long before dying starts its slot's delay over, ms. */
export const RESTART_STABLE_MS = 30_000;

/** The delay before the `deathsInARow`-th replacement of one slot (1 = the first), ms. */
export function restartDelay(deathsInARow: number, baseMs = RESTART_DELAY_MS, maxMs = RESTART_MAX_DELAY_MS): number {
  return Math.min(maxMs, baseMs * 2 ** Math.max(0, Math.min(deathsInARow - 1, 30)));
}

export interface ApiClusterOptions {
  /** node:cluster, as the primary sees it. */
  readonly cluster: Cluster;
  /** How many API processes (`WEB_CONCURRENCY`). */
  readonly size: number;
  /** Order-clock node of the first process; the others take the next ones (`clusterOrderNodes`). */
  readonly baseNode: number;
  readonly logger: Logger;
}

export interface ApiCluster {
  /** Resolves once every process listens; rejects when one exits before it ever listened (bad port, bad setting). */
  readonly ready: Promise<void>;
  /** Resolves when no process is left and none will be started: 0 if every one exited cleanly, else 1. */
  readonly done: Promise<number>;
  /**
   * SIGTERM to every process: each stops accepting, answers its in-flight requests, flushes the
   * writes it holds and exits. Resolves when all exited cleanly; rejects when one did not.
   */
  stop(): Promise<void>;
}

interface Slot {
  readonly node: number;
  worker: Worker | undefined;
  restartTimer: NodeJS.Timeout | undefined;
  startedAt: number;
  listened: boolean;
  deathsInARow: number;
}

/**
 * The primary of `WEB_CONCURRENCY` API processes sharing one port (node:cluster hands each new
 * connection to the next process). Each process gets its own order-clock node, also when it
 * replaces one that died (the same slot, the same node), so two processes of the host never mint
 * the same acceptance order. A process that dies (crash, kill -9) is replaced after a delay that
 * grows while its replacements keep dying. A process that exits cleanly was told to stop (a
 * signal sent to it or to the process group, as a terminal or a platform does) and is not
 * replaced; the primary ends when none is left.
 */
export function startApiCluster(options: ApiClusterOptions): ApiCluster {
  const { cluster, logger } = options;
  const slots: Slot[] = clusterOrderNodes(options.baseNode, options.size).map((node) => ({ node, worker: undefined, restartTimer: undefined, startedAt: 0, listened: false, deathsInARow: 0 }));
  let stopping = false;
  let started = false;
  let failed = false;
  let resolveReady!: () => void;
  let rejectReady!: (err: Error) => void;
  const ready = new Promise<void>((res, rej) => {
    resolveReady = res;
    rejectReady = rej;
  });
  // Nobody may be waiting on `ready` (the primary logs through `done`).
  ready.catch(() => undefined);
  let resolveDone!: (code: number) => void;
  const done = new Promise<number>((res) => (resolveDone = res));

  const finishIfEmpty = () => {
    if (slots.every((s) => s.worker === undefined && s.restartTimer === undefined)) resolveDone(failed ? 1 : 0);
  };

  const terminateAll = () => {
    stopping = true;
    for (const slot of slots) {
      clearTimeout(slot.restartTimer);
      slot.restartTimer = undefined;
      slot.worker?.process.kill('SIGTERM');
    }
    finishIfEmpty();
  };

  const onExit = (slot: Slot, worker: Worker, code: number | null, signal: string | null) => {
    if (slot.worker === worker) slot.worker = undefined;
    const pid = worker.process.pid;
    const clean = code === 0 && signal === null;
    if (!clean && stopping) failed = true;
    if (stopping || clean) {
      if (!stopping) logger.info({ api_pid: pid, order_node: slot.node }, 'api process exited cleanly; not replaced');
      finishIfEmpty();
      return;
    }
    if (!started && !slot.listened) {
      // It never listened: the next one would fail the same way (a port in use, a bad setting).
      failed = true;
      logger.error({ api_pid: pid, code, signal }, 'api process exited before it listened; stopping the others');
      rejectReady(new Error(`an API process exited before it listened (code ${code}, signal ${signal})`));
      terminateAll();
      return;
    }
    slot.deathsInARow = Date.now() - slot.startedAt >= RESTART_STABLE_MS ? 1 : slot.deathsInARow + 1;
    const delay = restartDelay(slot.deathsInARow);
    logger.error({ api_pid: pid, code, signal, order_node: slot.node, restart_in_ms: delay }, 'api process died; starting another');
    slot.restartTimer = setTimeout(() => {
      slot.restartTimer = undefined;
      fork(slot);
    }, delay);
  };

  const fork = (slot: Slot) => {
    // The child reads its node like any other setting; only main.ts reads the environment.
    const worker = cluster.fork({ ORDER_CLOCK_NODE: String(slot.node) });
    slot.worker = worker;
    slot.startedAt = Date.now();
    slot.listened = false;
    worker.once('listening', () => {
      slot.listened = true;
      if (!started && slots.every((s) => s.listened)) {
        started = true;
        resolveReady();
      }
    });
    worker.once('exit', (code: number | null, signal: string | null) => onExit(slot, worker, code, signal));
  };

  for (const slot of slots) fork(slot);

  return {
    ready,
    done,
    async stop() {
      terminateAll();
      if ((await done) !== 0) throw new Error('an API process did not shut down cleanly');
    },
  };
}
