import { expect } from 'chai';
import { deflateRawSync } from 'node:zlib';
import { decodeJob, encodeJob } from '../../shared/job-payload.js';
import { type Write } from '../../shared/writes.js';
import { JOB_PAYLOAD_VERSION, JOB_PAYLOAD_VERSION_DEFLATE } from '../../shared/job-payload.js';

function write(i: number): Write {
  return {
    kind: 'record',
    request_id: `req-${i}`,
    accepted_at: 1_700_000_000_000 + i,
    api_key: 'tester',
    record_id: `rec_${String(i).padStart(34, '0')}`,
    response_id: `rsp_${String(i).padStart(22, '0')}`,
    record: { feedback_dataset_id: 'ds', field_to_value: { prompt: `question ${i}`, answer: 'Open Settings, then Security, choose Reset password. '.repeat(4), 'ünï 👍🏽': [{ toString: [i] }] } },
    response: { status: 'submitted', values: { helpful: i % 2 }, user_id: `user-${i}` },
  } as Write;
}
const deflated = (value: unknown) => deflateRawSync(JSON.stringify(value)).toString('base64');

describe('job payload (shared/job-payload.ts)', () => {
  it('deflate: round-trips the writes exactly and carries their count', async () => {
    const writes = Array.from({ length: 50 }, (_, i) => write(i));
    const data = await encodeJob(writes, 'deflate');
    expect(data).to.have.property('v', JOB_PAYLOAD_VERSION_DEFLATE);
    expect(data).to.have.property('n', 50);
    expect(decodeJob(data)).to.deep.equal({ ok: true, writes });
  });

  it('deflate: a job too long to deflate on the event loop (deflated on the thread pool) round-trips the same', async () => {
    const writes = Array.from({ length: 400 }, (_, i) => write(i));
    expect(JSON.stringify(writes).length).to.be.greaterThan(64 * 1024);
    const data = await encodeJob(writes, 'deflate');
    expect(data).to.have.property('n', 400);
    expect(decodeJob(data)).to.deep.equal({ ok: true, writes });
  });

  it('deflate: a job of similar writes takes far less room in Redis than their JSON', async () => {
    const writes = Array.from({ length: 50 }, (_, i) => write(i));
    const packed = JSON.stringify(await encodeJob(writes, 'deflate')).length;
    const plain = JSON.stringify(await encodeJob(writes, 'none')).length;
    expect(packed).to.be.lessThan(plain / 2);
  });

  it('none: the plain version-1 envelope, readable in Redis tools', async () => {
    const writes = [write(1)];
    const data = await encodeJob(writes, 'none');
    expect(data).to.deep.equal({ v: JOB_PAYLOAD_VERSION, writes });
    expect(decodeJob(data)).to.deep.equal({ ok: true, writes });
  });

  const bad: readonly [string, unknown, RegExp][] = [
    ['an unknown version', { v: 3, writes: [{}] }, /contract: v: /],
    ['a deflated job without its count', { v: JOB_PAYLOAD_VERSION_DEFLATE, z: deflated([{}]) }, /contract: n: /],
    ['a count of 0', { v: JOB_PAYLOAD_VERSION_DEFLATE, n: 0, z: deflated([]) }, /contract: n: .*>=1/],
    ['a payload that is not base64', { v: JOB_PAYLOAD_VERSION_DEFLATE, n: 1, z: 'not base64!' }, /z: is not base64/],
    ['bytes that are not deflate', { v: JOB_PAYLOAD_VERSION_DEFLATE, n: 1, z: Buffer.from('plain text, not deflated').toString('base64') }, /inflated/],
    ['deflated text that is not JSON', { v: JOB_PAYLOAD_VERSION_DEFLATE, n: 1, z: deflateRawSync('{"writes":').toString('base64') }, /inflated/],
    ['deflated JSON that is not a list', { v: JOB_PAYLOAD_VERSION_DEFLATE, n: 1, z: deflated({ 0: {} }) }, /no list/],
    ['a count that does not match the list', { v: JOB_PAYLOAD_VERSION_DEFLATE, n: 2, z: deflated([{}]) }, /1 writes, its header says 2/],
    ['an unknown property', { v: JOB_PAYLOAD_VERSION_DEFLATE, n: 1, z: deflated([{}]), extra: 1 }, /contract: extra: /],
  ];
  for (const [name, data, error] of bad) {
    it(`refuses ${name}, saying why`, () => {
      const decoded = decodeJob(data);
      expect(decoded.ok).to.equal(false);
      if (!decoded.ok) expect(decoded.error).to.match(error);
    });
  }

  it('refuses a payload that inflates beyond the limit instead of allocating it', () => {
    const bomb = { v: JOB_PAYLOAD_VERSION_DEFLATE, n: 1, z: deflateRawSync(Buffer.alloc(4 * 1024 * 1024, 0x20)).toString('base64') };
    const decoded = decodeJob(bomb, 1024 * 1024);
    expect(decoded.ok).to.equal(false);
    if (!decoded.ok) expect(decoded.error).to.match(/inflated/);
    expect(decodeJob(bomb, 8 * 1024 * 1024).ok).to.equal(false); // inflates, but to 4 MiB of spaces: not a list
  });
});
