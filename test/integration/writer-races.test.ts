import { expect } from 'chai';
import { COLLECTIONS } from '../../shared/mongo.js';
import { createFeedbackWriter } from '../../worker/writer.js';
import { startRacingWorkers, type RacingWorkers } from '../helpers/racing-workers.js';
import { silentLogger } from '../helpers/stack.js';
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
  let race: RacingWorkers | undefined;

  afterEach(async function () {
    await race?.close(this.currentTest?.state === 'failed');
    race = undefined;
  });

  it(`${WORKERS} worker processes, ${RECORDS * ANNOTATORS} responses of ${VERSIONS} versions each in shuffled jobs: the newest version of every response is stored`, async () => {
    race = await startRacingWorkers('writer-races', seed);
    const { db } = race;
    // The records first, so that no response waits for its record.
    await createFeedbackWriter({ db, logger: silentLogger }).write(Array.from({ length: RECORDS }, (_, r) => recordWrite(r + 1)));

    const all = Array.from({ length: RECORDS }, (_, r) => r + 1).flatMap((r) => Array.from({ length: ANNOTATORS }, (_, u) => u + 1).flatMap((u) => Array.from({ length: VERSIONS }, (_, v) => version(r, u, v + 1))));
    await race.enqueue(shuffled(all, seed));
    await race.run({ workers: WORKERS, maxDelayMs: 15, env: { WORKER_CONCURRENCY: '8' }, timeoutMs: 180_000 });

    const docs = await db.collection<{ _id: string; seq: number; values: Record<string, unknown> }>(COLLECTIONS.responses).find({ _id: { $regex: /^rsp_\d+_\d+$/ } }).toArray();
    const newest = (id: string) => {
      const [, r, u] = id.split('_');
      return version(Number(r), Number(u), VERSIONS).seq;
    };
    const wrong = docs.filter((d) => d.values['v'] !== VERSIONS || d.seq !== newest(d._id)).map((d) => `${d._id}: v=${String(d.values['v'])}`);
    // A version refused as if for good would let the writer store the next older one in its place.
    const letters = await db.collection(COLLECTIONS.deadLetters).find({}, { projection: { reason: 1, error: 1, request_id: 1 } }).toArray();
    expect(letters.map((l) => `${String(l['request_id'])}: ${String(l['reason'])}: ${String(l['error'])}`), 'dead letters').to.deep.equal([]);
    expect(docs, 'one document per response').to.have.length(RECORDS * ANNOTATORS);
    expect(wrong, `responses not at their newest version (replay with WRITER_RACE_SEED=${seed})`).to.deep.equal([]);
  });
});
