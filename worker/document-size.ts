import { BSON } from 'mongodb';

/**
 * MongoDB's limit on one document (BSON), bytes: `maxBsonObjectSize` of every server since 1.8,
 * and of FerretDB and DocumentDB alike.
 */
export const STORE_MAX_DOCUMENT_BYTES = 16 * 1024 * 1024;

/**
 * Why the store would refuse this document (or update) for its size, before it is sent; else
 * undefined. Checked by the worker so that a write over the limit is refused alone, at once:
 * sent among others, it makes the driver refuse the whole command before sending it (no
 * per-document error), and each document would then be tried one at a time.
 */
export function oversizeError(doc: object): string | undefined {
  const size = BSON.calculateObjectSize(doc as BSON.Document);
  return size > STORE_MAX_DOCUMENT_BYTES ? `document of ${size} bytes is larger than the store's limit of ${STORE_MAX_DOCUMENT_BYTES} bytes` : undefined;
}
