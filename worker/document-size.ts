import { BSON, MongoInvalidArgumentError } from 'mongodb';

/**
 * MongoDB's limit on one document (BSON), bytes: `maxBsonObjectSize` of every server since 1.8,
 * and of FerretDB and DocumentDB alike.
 */
export const STORE_MAX_DOCUMENT_BYTES = 16 * 1024 * 1024;

/**
 * Why the store would refuse this document (or update) for its size; else undefined. The driver
 * refuses a document of `maxBsonObjectSize` bytes or more while it builds a command, so the bound
 * is the same here.
 */
export function oversizeError(doc: object): string | undefined {
  const size = BSON.calculateObjectSize(doc as BSON.Document);
  return size >= STORE_MAX_DOCUMENT_BYTES ? `document of ${size} bytes is larger than the store's limit of ${STORE_MAX_DOCUMENT_BYTES} bytes` : undefined;
}

/** The driver's refusal of a bulk command holding a document over the limit: thrown while it builds the command, before anything is sent. */
function isDriverSizeRefusal(err: unknown): boolean {
  return err instanceof MongoInvalidArgumentError && /larger than the maximum size/.test(err.message);
}

/**
 * After `err` from a bulk command of `items`: when it is the driver's size refusal (nothing was
 * sent), the items over the limit are refused alone and the others go again together by `send`.
 * Undefined when `err` is something else, or names no item over the limit (the caller's
 * one-at-a-time path then decides each).
 *
 * Measured only here, after the refusal: the driver serializes every document once to build the
 * command and checks its size then, so measuring each beforehand was a second pass over every
 * document (5.6–7.6 % of the worker's CPU in a profile of the drain, 2026-11-27).
 */
export async function splitOversize<T, R>(err: unknown, items: readonly T[], measure: (item: T) => object, send: (fitting: readonly T[]) => Promise<R[]>, refused: (error: string) => R): Promise<R[] | undefined> {
  if (!isDriverSizeRefusal(err)) return undefined;
  const oversize = items.map((item) => oversizeError(measure(item)));
  if (oversize.every((e) => e === undefined)) return undefined;
  const fitting = items.filter((_, i) => oversize[i] === undefined);
  const sent = fitting.length === 0 ? [] : await send(fitting);
  let next = 0;
  return oversize.map((error) => (error === undefined ? sent[next++]! : refused(error)));
}
