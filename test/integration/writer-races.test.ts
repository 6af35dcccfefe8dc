import { expect } from 'chai';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { MongoClient } from 'mongodb';
import { COLLECTIONS, mongoClientOptions } from '../../shared/mongo.js';
import { JOB_PAYLOAD_VERSION } from '../../shared/job-payload.js';
import { WRITE_JOB_NAME } from '../../shared/queue.js';
import { ensureIndexes } from '../../worker/indexes.js';
import { createFeedbackWriter } from '../../worker/writer.js';
import { msg, saveLogs, spawnService, type ServiceProcess } from '../../devkit/processes.js';
import { startDelayProxy, type DelayProxy } from '../helpers/delay-proxy.js';
import { uniqueName } from '../helpers/env.js';
import { sharedServices } from '../helpers/root-hooks.js';
import { eventually, silentLogger } from '../helpers/stack.js';
import { recordWrite, shuffled, version } from '../helpers/writes.js';

const RECORDS = 10;
const ANNOTATORS = 3;
const VERSIONS = 12;
const WORKERS = 3;

/**
 * Without leases, order rests on the store's single-document conditional update
 * (`{_id, seq: {$lte}}` upsert; a duplicate key when a later version is stored). Several worker
 * processes take jobs holding versions of the same responses, in a shuffled order, at once,
 * through a proxy that holds every command and reply for a random time, so that their updates
 * of one response reach the store interleaved. Whatever the interleaving, the newest version of
 * every response must be what is stored. Drop the `seq` guard from the filter and this fails.
 */
describe('worker processes racing on the same responses (the store\'s conditional update)', function () {
  this.timeout(240_000);
  const seed = Number(process.env['WRITER_RACE_SEED'] ?? Date.now() % 100_000);
  let proxy: DelayProxy | undefined;
  let queue: Queue | undefined;
  let connection: Redis | undefined;
  let client: MongoClient | undefined;
  const workers: ServiceProcess[] = [];

  afterEach(async function () {
    if (this.currentTest?.state === 'failed') saveLogs('writer-races', workers);
    await Promise.all(workers.splice(0).map((w) => w.kill()));
    await queue?.obliterate({ force: true }).catch(() => undefined);
    await queue?.close();
    connection?.disconnect();
    await proxy?.close();
    await client?.close();
  });

  it(`${WORKERS} worker processes, ${RECORDS * ANNOTATORS} responses of ${VERSIONS} versions each in shuffled jobs: the newest version of every response is stored`, async () => {
    const { redisUrl, mongoUrl } = sharedServices();
    const database = uniqueName('races').replace(/-/g, '_');
    const queueName = uniqueName('races');
    client = new MongoClient(mongoUrl, mongoClientOptions());
    const db = client.db(database);
    await ensureIndexes(db);
    // The records first, so that no response waits for its record.
    await createFeedbackWriter({ db, logger: silentLogger }).write(Array.from({ length: RECORDS }, (_, r) => recordWrite(r + 1)));

    const all = Array.from({ length: RECORDS }, (_, r) => r + 1).flatMap((r) => Array.from({ length: ANNOTATORS }, (_, u) => u + 1).flatMap((u) => Array.from({ length: VERSIONS }, (_, v) => version(r, u, v + 1))));
    const order = shuffled(all, seed);
    connection = new Redis(redisUrl, { maxRetriesPerRequest: null });
    queue = new Queue(queueName, { connection });
    // Paused until every worker process takes jobs, so that none drains the queue alone.
    await queue.pause();
    let jobs = 0;
    for (let i = 0; i < order.length; jobs++) {
      const size = 1 + ((i * 7 + seed) % 3);
      const writes = order.slice(i, i + size).map((item) => ({ ...item.write, seq: item.seq }));
      await queue.add(WRITE_JOB_NAME, { v: JOB_PAYLOAD_VERSION, writes } as never, { attempts: 5 });
      i += size;
    }

    proxy = await startDelayProxy(Number(new URL(mongoUrl).port), 15);
    const env = {
      NODE_ENV: 'test',
      REDIS_URL: redisUrl,
      MONGODB_URI: `mongodb://127.0.0.1:${proxy.port}/${database}`,
      QUEUE_NAME: queueName,
      WORKER_CONCURRENCY: '8',
      LOG_LEVEL: 'info',
    };
    for (let k = 0; k < WORKERS; k++) workers.push(spawnService(`worker-${k}`, 'worker/main.ts', env));
    await Promise.all(workers.map((w) => w.waitForLog(msg('worker started'), 60_000, 'worker started')));
    await queue.resume();

    await eventually(
      async () => {
        const counts = await queue!.getJobCounts('completed', 'failed');
        if ((counts['failed'] ?? 0) > 0) throw new Error(`${counts['failed']} job(s) failed`);
        return counts['completed'] === jobs ? true : undefined;
      },
      180_000,
      `${jobs} jobs completed`,
    );

    // Every process stored some of the jobs: the versions of one response went through several.
    const storedBy = workers.map((w) => w.lines.filter((l) => l.json?.['msg'] === 'job stored').length);
    expect(storedBy.every((n) => n > 0), `jobs stored per worker process: ${storedBy.join(', ')}`).to.equal(true);

    const docs = await db.collection<{ _id: string; seq: number; values: Record<string, unknown> }>(COLLECTIONS.responses).find({ _id: { $regex: /^rsp_\d+_\d+$/ } }).toArray();
    const newest = (id: string) => {
      const [, r, u] = id.split('_');
      return version(Number(r), Number(u), VERSIONS).seq;
    };
    const wrong = docs.filter((d) => d.values['v'] !== VERSIONS || d.seq !== newest(d._id)).map((d) => `${d._id}: v=${String(d.values['v'])}`);
    expect(docs, 'one document per response').to.have.length(RECORDS * ANNOTATORS);
    expect(wrong, `responses not at their newest version (replay with WRITER_RACE_SEED=${seed})`).to.deep.equal([]);
  });
});
