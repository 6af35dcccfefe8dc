/*
 * Which shards of the write queue this API process sends writes to. A shard whose job failed
 * (its master does not answer, CLUSTERDOWN/TRYAGAIN, a timeout, WAIT falling short of
 * REDIS_MIN_REPLICAS_ACK) is `down`: new writes go to other shards, and a background probe (a
 * write of the shard's own probe key, with WAIT when replicas must confirm) asks it again every
 * `probeMs` until it answers, so no client write is spent finding out. Pure logic over an
 * injected probe and clock; api/enqueuer.ts reports outcomes and asks where to send.
 */

export type ShardState = 'up' | 'down';

export interface ShardHealth {
  healthy(shard: number): boolean;
  /** A job to `shard` failed with `reason`: stop sending there and start probing it. */
  reportFailure(shard: number, reason: string): void;
  /** A job to `shard` was acknowledged. */
  reportSuccess(shard: number): void;
  /** The first healthy shard after `from` (round the ring), or undefined when none is. */
  nextHealthy(from: number): number | undefined;
  states(): readonly ShardState[];
  /** Stops the probes. */
  close(): void;
}

export interface ShardHealthOptions {
  readonly shards: number;
  /** Resolves when the shard takes (and, with replicas required, replicates) a write; rejects or resolves false when not. */
  readonly probe: (shard: number) => Promise<boolean>;
  /** Pause between two probes of a shard that is down, ms. */
  readonly probeMs: number;
  /** Called on each change of state (logs, metrics). */
  readonly onChange?: (shard: number, state: ShardState, reason: string) => void;
}

export function createShardHealth(options: ShardHealthOptions): ShardHealth {
  const { shards, probe, probeMs, onChange } = options;
  const state: ShardState[] = Array.from({ length: shards }, () => 'up');
  const timers = new Map<number, NodeJS.Timeout>();
  let closed = false;

  function set(shard: number, next: ShardState, reason: string): void {
    if (state[shard] === next) return;
    state[shard] = next;
    onChange?.(shard, next, reason);
  }

  function scheduleProbe(shard: number): void {
    if (closed || timers.has(shard)) return;
    const timer = setTimeout(() => {
      void probe(shard)
        .catch(() => false)
        .then((ok) => {
          timers.delete(shard);
          if (ok) set(shard, 'up', 'probe answered');
          else scheduleProbe(shard);
        });
    }, probeMs);
    timer.unref();
    timers.set(shard, timer);
  }

  return {
    healthy: (shard) => state[shard] === 'up',
    reportFailure(shard, reason) {
      set(shard, 'down', reason);
      scheduleProbe(shard);
    },
    reportSuccess(shard) {
      // A job sent before the shard went down may be acknowledged after: the probe decides.
      if (timers.has(shard)) return;
      set(shard, 'up', 'job acknowledged');
    },
    nextHealthy(from) {
      for (let k = 1; k <= shards; k++) {
        const shard = (from + k) % shards;
        if (state[shard] === 'up') return shard;
      }
      return undefined;
    },
    states: () => [...state],
    close() {
      closed = true;
      for (const t of timers.values()) clearTimeout(t);
      timers.clear();
    },
  };
}
