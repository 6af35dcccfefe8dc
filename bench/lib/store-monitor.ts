// A MongoDB client that counts the commands it sends and the store's time answering them, by
// command name and collection: what a pass of the drain benchmark asks of the store.
import { MongoClient, type CommandFailedEvent, type CommandStartedEvent, type CommandSucceededEvent } from 'mongodb';
import { mongoClientOptions } from '../../shared/mongo.js';
import { storeCpuSeconds } from './proc-cpu.js';

export interface Monitor {
  readonly client: MongoClient;
  /** Commands started since the last reset, by name and collection. */
  take(): Map<string, number>;
  /** Seconds the store spent answering, by command name and collection, since the last take() (summed over concurrent commands). */
  lastSeconds(): Map<string, number>;
  /**
   * CPU seconds of the store's processes (its PostgreSQL cluster, FerretDB, Redis: bench/lib/proc-cpu.ts)
   * between the last two take() calls; NaN without the PostgreSQL port.
   */
  lastStoreCpuSeconds(): number;
}

/** A client with the worker's options (shared/mongo.ts createMongo) that counts the commands it sends; with `postgresPort`, also the store's CPU. */
export async function monitoredClient(url: string, postgresPort?: number): Promise<Monitor> {
  const cpuNow = () => (postgresPort === undefined ? Number.NaN : storeCpuSeconds(postgresPort));
  let cpuAt = cpuNow();
  let cpuTaken = Number.NaN;
  const client = new MongoClient(url, { ...mongoClientOptions(), retryWrites: false, serverSelectionTimeoutMS: 5000, socketTimeoutMS: 120_000, appName: 'bench-drain', monitorCommands: true });
  let counts = new Map<string, number>();
  let seconds = new Map<string, number>();
  let taken = new Map<string, number>();
  // By command and collection ("find feedback_erasures"): a command name alone hid which read cost the store (docs/performance.md).
  const keys = new Map<number, string>();
  client.on('commandStarted', (e: CommandStartedEvent) => {
    const target: unknown = e.command[e.commandName];
    const key = typeof target === 'string' ? `${e.commandName} ${target}` : e.commandName;
    keys.set(e.requestId, key);
    counts.set(key, (counts.get(key) ?? 0) + 1);
  });
  const ended = (e: CommandSucceededEvent | CommandFailedEvent) => {
    const key = keys.get(e.requestId) ?? e.commandName;
    keys.delete(e.requestId);
    seconds.set(key, (seconds.get(key) ?? 0) + e.duration / 1000);
  };
  client.on('commandSucceeded', ended);
  client.on('commandFailed', ended);
  await client.connect();
  return {
    client,
    take() {
      const cpu = cpuNow();
      cpuTaken = cpu - cpuAt;
      cpuAt = cpu;
      const c = counts;
      counts = new Map();
      taken = seconds;
      seconds = new Map();
      return c;
    },
    lastSeconds: () => taken,
    lastStoreCpuSeconds: () => cpuTaken,
  };
}

export const sumCounts = (c: Map<string, number>) => [...c.values()].reduce((a, b) => a + b, 0);
export const countsText = (c: Map<string, number>) => [...c.entries()].sort((a, b) => b[1] - a[1]).map(([k, v]) => `${k} ${v}`).join(', ');
