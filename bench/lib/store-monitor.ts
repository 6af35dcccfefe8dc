// A MongoDB client that counts the commands it sends and the store's time answering them, by
// command name: what a pass of the drain benchmark asks of the store.
import { MongoClient, type CommandFailedEvent, type CommandStartedEvent, type CommandSucceededEvent } from 'mongodb';
import { mongoClientOptions } from '../../shared/mongo.js';

export interface Monitor {
  readonly client: MongoClient;
  /** Commands started since the last reset, by name. */
  take(): Map<string, number>;
  /** Seconds the store spent answering, by command name, since the last take() (summed over concurrent commands). */
  lastSeconds(): Map<string, number>;
}

/** A client with the worker's options (shared/mongo.ts createMongo) that counts the commands it sends. */
export async function monitoredClient(url: string): Promise<Monitor> {
  const client = new MongoClient(url, { ...mongoClientOptions(), retryWrites: false, serverSelectionTimeoutMS: 5000, socketTimeoutMS: 120_000, appName: 'bench-drain', monitorCommands: true });
  let counts = new Map<string, number>();
  let seconds = new Map<string, number>();
  let taken = new Map<string, number>();
  client.on('commandStarted', (e: CommandStartedEvent) => counts.set(e.commandName, (counts.get(e.commandName) ?? 0) + 1));
  const ended = (e: CommandSucceededEvent | CommandFailedEvent) => seconds.set(e.commandName, (seconds.get(e.commandName) ?? 0) + e.duration / 1000);
  client.on('commandSucceeded', ended);
  client.on('commandFailed', ended);
  await client.connect();
  return {
    client,
    take() {
      const c = counts;
      counts = new Map();
      taken = seconds;
      seconds = new Map();
      return c;
    },
    lastSeconds: () => taken,
  };
}

export const sumCounts = (c: Map<string, number>) => [...c.values()].reduce((a, b) => a + b, 0);
export const countsText = (c: Map<string, number>) => [...c.entries()].sort((a, b) => b[1] - a[1]).map(([k, v]) => `${k} ${v}`).join(', ');
