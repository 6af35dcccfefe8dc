/**
 * Most documents per store command of a round's inserts and updates. A round of 2,000 writes then
 * goes as several commands at once rather than one: a PostgreSQL-based store (the stand-in)
 * runs a command on one backend, so one large command uses one core of it, and MongoDB serves
 * concurrent commands on as many cores as it has. Smaller commands cost the store more CPU a write
 * once they outnumber its cores (concurrent backends contend for the same index pages): on the
 * 2-core stand-in, 250 cost 195–243 µs of store CPU a write on the usual mix, 500 164–203, 2,000
 * 148–206, with 500 draining fastest (docs/performance.md, store command sizes).
 */
export const STORE_CHUNK_DOCS = 500;

/**
 * Runs `apply` on consecutive slices of at most `size` items at once and returns their results
 * in the items' order. Slices are contiguous, so items sorted before (updates in `_id` order,
 * worker/updates.ts) stay sorted in every command, and every command takes its locks in the same
 * global order. The first slice to throw rejects the whole; the others run to their end (their
 * writes are idempotent, and the job that held them runs again).
 */
export async function inChunks<T, R>(items: readonly T[], size: number, apply: (slice: readonly T[]) => Promise<R[]>): Promise<R[]> {
  if (items.length <= size) return apply(items);
  const slices: T[][] = [];
  for (let i = 0; i < items.length; i += size) slices.push(items.slice(i, i + size));
  const results = await Promise.all(slices.map((slice) => apply(slice)));
  return results.flat();
}

/**
 * `batchSize` of a round's reads (documents by a round's ids): the first batch holds them all. The
 * default first batch is 101 documents, and each further batch is one more round trip in the
 * round's critical path (a `getMore`).
 */
export const ROUND_READ_BATCH = 100_000;
