import type { AuthenticatedKey } from './key-verifier.js';

// The scope policy: what an authenticated key may do with a dataset.

/** True when `key` may write to `datasetId`. */
export function mayWriteDataset(key: AuthenticatedKey, datasetId: string): boolean {
  return key.datasets === null || key.datasets.includes(datasetId);
}

/**
 * True when `key` may read `datasetId`: admin keys read every dataset; other keys need the read
 * scope, and read only the datasets they may write to. A write key cannot read (a chatbot's key
 * would otherwise expose everyone's feedback).
 */
export function mayReadDataset(key: AuthenticatedKey, datasetId: string): boolean {
  return key.admin || (key.read && mayWriteDataset(key, datasetId));
}
