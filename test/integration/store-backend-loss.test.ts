import { expect } from 'chai';
import { readdirSync, readFileSync } from 'node:fs';
import { startFerretDb, type StoreServer } from '../../devkit/servers.js';
import { sharedServices } from '../helpers/root-hooks.js';
import { testConfig } from '../helpers/env.js';
import { deadLetters, eventually, recordBody, records, startStack, type Stack } from '../helpers/stack.js';

/*
 * The stand-in's own failure mode: FerretDB v2 stays up while a PostgreSQL backend under it dies
 * (a crash, an OOM kill). PostgreSQL then resets every backend and recovers; meanwhile FerretDB
 * answers with code 1 and texts like "unexpected EOF" or "the database system is in recovery
 * mode". The worker must wait that out as an outage, not refuse the writes.
 */

/** The argv of a process, or nothing when it is gone. */
function cmdline(pid: string): string[] {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
  } catch {
    return [];
  }
}

/** The pids of the client backends (connections from 127.0.0.1) of the cluster listening on `port`. */
function clientBackends(port: number): number[] {
  const parentOf = new Map<string, string>();
  for (const pid of readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      parentOf.set(pid, stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]!);
    } catch {
      // gone meanwhile
    }
  }
  const postmaster = [...parentOf.keys()].find((pid) => {
    const args = cmdline(pid);
    return args.some((a) => a.endsWith('/postgres')) && args[args.indexOf('-p') + 1] === String(port);
  });
  if (postmaster === undefined) throw new Error(`no PostgreSQL postmaster on port ${port}`);
  return [...parentOf].filter(([pid, parent]) => parent === postmaster && cmdline(pid).join(' ').includes('127.0.0.1(')).map(([pid]) => Number(pid));
}

describe('the store losing its PostgreSQL backend under load', function () {
  this.timeout(120_000);
  let store: StoreServer;
  let stack: Stack;
  before(async () => {
    store = await startFerretDb();
    // Two attempts and a short backoff: a loss read as a refusal would dead-letter writes within a second.
    stack = await startStack(testConfig({ JOB_ATTEMPTS: '2', JOB_BACKOFF_MS: '100', STORE_RETRY_MAX_DELAY_MS: '500' }, { redisUrl: sharedServices().redisUrl, mongoUrl: store.url }));
  });
  after(async () => {
    await stack?.close();
    await store?.destroy();
  });

  it('a backend killed twice in the middle of a burst: every accepted write is stored once, none dead-lettered', async () => {
    const TOTAL = 600;
    let sent = 0;
    const accepted: string[] = [];
    const sender = async () => {
      while (sent < TOTAL) {
        const i = sent++;
        const res = await stack.post('/feedback-record', recordBody({ record: { external_id: `loss-${i}` } }));
        if (res.status === 200) accepted.push(res.body.feedback_record_id as string);
      }
    };
    // The test's own reads meet the recovery too: a failed count is no count.
    const stored = () => records(stack.db).countDocuments({}).catch(() => -1);
    const senders = Promise.all(Array.from({ length: 8 }, sender));
    for (const after of [150, 350]) {
      await eventually(async () => ((await stored()) >= after ? true : undefined), 60_000, `${after} records stored`);
      // SIGKILL of one client backend: the postmaster takes it for a crash, resets every backend
      // and recovers. After the first kill's reset FerretDB reconnects: wait for a backend to be
      // back, and look again when the one found went away before the signal.
      await eventually(async () => {
        for (const pid of clientBackends(store.postgres.port)) {
          try {
            process.kill(pid, 'SIGKILL');
            return true;
          } catch {
            // gone meanwhile
          }
        }
        return undefined;
      }, 30_000, 'a client backend of the private cluster to kill');
    }
    await senders;
    expect(accepted.length, 'the API accepts while the store recovers (the queue holds the writes)').to.equal(TOTAL);
    await eventually(async () => ((await stored()) >= TOTAL ? true : undefined), 90_000, 'every accepted record stored').catch(async (err: unknown) => {
      // Where the missing writes are, for whoever reads the failure.
      const q = stack.api.queue;
      const failed = (await q.getFailed()).map((j) => j.failedReason);
      const letters = await deadLetters(stack.db).countDocuments({}).catch(() => -1);
      throw new Error(`${(err as Error).message}: ${await stored()} stored, ${letters} dead letters, jobs ${JSON.stringify(await q.getJobCounts())}, failed ${JSON.stringify(failed)}`, { cause: err });
    });
    // Read once the store answers again (the second kill's recovery may still be under way).
    const settled = <T>(read: () => Promise<T>) => eventually(async () => read().catch(() => undefined), 30_000, 'the store answering');
    expect(await settled(() => deadLetters(stack.db).countDocuments({})), 'dead letters').to.equal(0);
    const ids = await settled(() => records(stack.db).find({}, { projection: { _id: 1 } }).toArray());
    expect(ids.length).to.equal(TOTAL);
    expect(new Set(ids.map((d) => d._id))).to.deep.equal(new Set(accepted));
  });
});
