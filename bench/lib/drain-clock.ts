// The timing of a drain pass (bench/scenarios/worker-drain.ts, textbook-drain.ts): wall time, the
// bench process's CPU (the worker under test runs in it) and the store commands, from start() on.
import type { Monitor } from './store-monitor.js';

export interface DrainClock {
  /** Seconds since the start, CPU µs per write over them (the bench process's, and the store's: NaN when the monitor cannot read it), and the store commands counted meanwhile. */
  stop(writes: number): { seconds: number; cpuUsPerWrite: number; storeCpuUsPerWrite: number; commands: Map<string, number> };
}

export function startDrainClock(mon: Monitor): DrainClock {
  mon.take();
  const cpu0 = process.cpuUsage();
  const started = process.hrtime.bigint();
  return {
    stop(writes) {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const cpu = process.cpuUsage(cpu0);
      const commands = mon.take();
      return { seconds, cpuUsPerWrite: (cpu.user + cpu.system) / writes, storeCpuUsPerWrite: (mon.lastStoreCpuSeconds() * 1e6) / writes, commands };
    },
  };
}
