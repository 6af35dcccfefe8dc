import { inflateRawSync } from 'node:zlib';
import * as v from 'valibot';
import { deflateText } from './deflate.js';
import type { Write } from './writes.js';

/** Version of the job payload; the worker refuses other versions (dead-letters them). */
export const JOB_PAYLOAD_VERSION = 1;

/**
 * The envelope of a queued job. Writes are validated one by one with {@link Write}, so one bad
 * write does not sink its batch.
 */
export const JobEnvelope = v.strictObject({
  v: v.literal(JOB_PAYLOAD_VERSION),
  writes: v.pipe(v.array(v.unknown()), v.minLength(1)),
});
interface JobPayload {
  readonly v: typeof JOB_PAYLOAD_VERSION;
  readonly writes: readonly Write[];
}

/** Version of the deflated job payload (see shared/job-payload.ts). */
export const JOB_PAYLOAD_VERSION_DEFLATE = 2;

/** A job whose writes are deflated: `z` is base64 of the deflate-raw JSON list of `n` writes. */
export const JobEnvelopeDeflate = v.strictObject({
  v: v.literal(JOB_PAYLOAD_VERSION_DEFLATE),
  n: v.pipe(v.number(), v.integer(), v.minValue(1)),
  z: v.pipe(v.string(), v.minLength(1), v.regex(/^[A-Za-z0-9+/]*={0,2}$/, 'is not base64')),
});
interface DeflatedJobPayload {
  readonly v: typeof JOB_PAYLOAD_VERSION_DEFLATE;
  readonly n: number;
  readonly z: string;
}

/** What a write job carries in Redis. */
export type JobData = JobPayload | DeflatedJobPayload;


/** How the API packs the writes of a job. `deflate` is the default (see docs/ARCHITECTURE.md, "Compact jobs"). */
export const JOB_COMPRESSIONS = ['deflate', 'none'] as const;
export type JobCompression = (typeof JOB_COMPRESSIONS)[number];

/**
 * Largest inflated payload the worker accepts, bytes: a job carries at most 4,000 writes of at
 * most the body limit, but a corrupt or hostile job must not make the worker allocate without
 * bound. 512 MiB is far above any real job (200 × 1 MiB bodies by default).
 */
const MAX_INFLATED_BYTES = 512 * 1024 * 1024;

/**
 * Packs the writes of one job. With `deflate`, the JSON of the writes is deflated (level 1: the
 * fastest; the writes of one job share most of their keys and much of their text) and carried as
 * base64, so Redis holds well under the JSON size per write.
 */
export async function encodeJob(writes: readonly Write[], compression: JobCompression): Promise<JobData> {
  if (compression === 'none') return { v: JOB_PAYLOAD_VERSION, writes };
  const packed = await deflateText(JSON.stringify(writes));
  return { v: JOB_PAYLOAD_VERSION_DEFLATE, n: writes.length, z: packed.toString('base64') };
}

type DecodedJob = { readonly ok: true; readonly writes: readonly unknown[] } | { readonly ok: false; readonly error: string };

/**
 * Unpacks a job of any version this release knows (plain, or deflated). The writes are returned
 * unvalidated: each is checked on its own, so one bad write does not sink its job.
 */
export function decodeJob(data: unknown, maxInflatedBytes = MAX_INFLATED_BYTES): DecodedJob {
  const plain = v.safeParse(JobEnvelope, data);
  if (plain.success) return { ok: true, writes: plain.output.writes };
  const packed = v.safeParse(JobEnvelopeDeflate, data);
  if (!packed.success) {
    const version = typeof data === 'object' && data !== null ? (data as { v?: unknown }).v : undefined;
    const issues = version === JOB_PAYLOAD_VERSION_DEFLATE ? packed.issues : plain.issues;
    return { ok: false, error: `job payload does not match the contract: ${issues.map((i) => `${v.getDotPath(i) ?? 'job'}: ${i.message}`).join('; ')}` };
  }
  let writes: unknown;
  try {
    const bytes = Buffer.from(packed.output.z, 'base64');
    writes = JSON.parse(inflateRawSync(bytes, { maxOutputLength: maxInflatedBytes }).toString('utf8'));
  } catch (err) {
    return { ok: false, error: `job payload could not be inflated: ${(err as Error).message}` };
  }
  if (!Array.isArray(writes) || writes.length !== packed.output.n) {
    return { ok: false, error: `job payload holds ${Array.isArray(writes) ? `${writes.length} writes` : 'no list of writes'}, its header says ${packed.output.n}` };
  }
  return { ok: true, writes };
}
