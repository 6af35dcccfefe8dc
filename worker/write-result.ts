/** What became of one write. */
export type WriteResult =
  /** Stored: a record (with its first response, or a later version of it), or a response version. */
  | { readonly kind: 'stored' }
  /** A later-accepted version of the response is stored; `newer` is its order when known. */
  | { readonly kind: 'stale'; readonly newer: number | undefined }
  /** The record of this response is not stored yet (still queued in another job). */
  | { readonly kind: 'deferred' }
  /** The store refuses the write for good. */
  | { readonly kind: 'rejected'; readonly error: string }
  /** An erasure accepted after it covers it: not stored, or removed again (worker/erasure-guard.ts). */
  | { readonly kind: 'erased' };

export const STORED: WriteResult = { kind: 'stored' };
export const DEFERRED: WriteResult = { kind: 'deferred' };
export const ERASED: WriteResult = { kind: 'erased' };
