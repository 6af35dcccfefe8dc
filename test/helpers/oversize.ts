/**
 * The one kind of write that the API accepts and the store refuses for good: a document larger
 * than MongoDB's (and FerretDB's) 16 MiB limit, let through the API by a body limit above it.
 * Everything else the API's schemas accept, MongoDB 7 and its stand-in store.
 */
export const STORE_MAX_DOCUMENT_BYTES = 16 * 1024 * 1024;

/** A string that makes any document holding it too large for the store. */
export const OVERSIZE_TEXT = 'x'.repeat(STORE_MAX_DOCUMENT_BYTES + 1024);

/** BODY_LIMIT_BYTES for an API that must accept such a write. */
export const OVERSIZE_BODY_LIMIT_BYTES = String(20 * 1024 * 1024);
