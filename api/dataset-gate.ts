import type { DATASET_MODES } from '../shared/config.js';
import { AppError, type ErrorDetail } from '../shared/errors.js';
import type { IdMinter } from '../shared/ids.js';
import type { ResponseStatus } from '../shared/schemas.js';
import type { DatasetRegistry } from './dataset-store.js';
import type { CompiledDataset } from './dataset-validators.js';
import { storeUnavailable } from './store-down.js';

type DatasetMode = (typeof DATASET_MODES)[number];

interface ResponseInput {
  readonly status: ResponseStatus;
  readonly values: Readonly<Record<string, unknown>>;
}

export interface DatasetGate {
  readonly mode: DatasetMode;
  /**
   * A new record of `datasetId` with its first response and the suggestions sent with it (`at`:
   * the body path of each, by index): throws 400 `validation_failed` with every problem of all
   * three at once, or 404 `dataset_not_found`.
   */
  checkRecordWrite(datasetId: string, fieldToValue: Readonly<Record<string, unknown>>, response: ResponseInput, suggestions?: readonly SuggestionInput[], at?: (index: number) => string): void;
  /** The same for a response to `recordId`, whose record may still be queued. */
  checkResponseWrite(recordId: string, response: ResponseInput): Promise<void>;
  /** A suggestion for `recordId`, whose record may still be queued (found as for a response). */
  checkSuggestionWrite(recordId: string, suggestion: SuggestionInput, at: string): Promise<void>;
}

interface SuggestionInput {
  readonly question: string;
  readonly value: unknown;
}

function refuse(details: readonly ErrorDetail[]): never {
  const first = details[0]!;
  throw new AppError('validation_failed', `${first.path} ${first.message}`, { details });
}

/**
 * Checks writes against the definitions held by `registry`, before the 200. A response finds
 * its record's dataset from the 32-bit fingerprint in the record id, with no store read. Only
 * when two defined datasets share a fingerprint (among 1,000 datasets, some pair does with a
 * chance of about 1 in 8,600) is the record looked up in MongoDB (`recordDataset`); when it is
 * not stored yet (queued) or MongoDB does not answer, the response passes if it is valid for one
 * of the candidates.
 */
export function createDatasetGate(options: {
  registry: DatasetRegistry;
  ids: IdMinter;
  mode: DatasetMode;
  /** The dataset id of a stored record, or undefined (not stored, or the store did not answer). */
  recordDataset: (recordId: string) => Promise<string | undefined>;
  /** `Retry-After` of the 503 while the definitions are not loaded yet, seconds (default 1). */
  retryAfterSeconds?: number;
}): DatasetGate {
  const { registry, ids, mode, recordDataset } = options;

  /**
   * No definition found, under `strict`: 404, unless the definitions could not be loaded since
   * the process started (MongoDB not answering): then the dataset may well be defined, and the
   * answer is a retryable 503, never a final 404. (`open` takes the write either way: its
   * key-name rules hold without a definition.)
   */
  function undefinedDataset(message: string): void {
    if (mode !== 'strict') return;
    if (!registry.loaded()) {
      throw storeUnavailable(options.retryAfterSeconds ?? 1, 'the dataset definitions are not loaded yet (MongoDB has not answered since this process started); retry later');
    }
    throw new AppError('dataset_not_found', message);
  }

  function checkResponse(dataset: CompiledDataset, response: ResponseInput): void {
    const problems = dataset.checkResponse(response.values, response.status);
    if (problems.length > 0) refuse(problems);
  }

  /** The datasets a record id may belong to, narrowed to one when the stored record says which; [] = no definition. */
  async function datasetsOfRecord(recordId: string): Promise<readonly CompiledDataset[]> {
    const fingerprint = ids.recordFingerprint(recordId);
    const candidates = fingerprint === undefined ? [] : registry.byFingerprint(fingerprint);
    if (candidates.length <= 1) return candidates;
    const stored = await recordDataset(recordId);
    const known = stored === undefined ? undefined : candidates.find((c) => c.definition.id === stored);
    return known === undefined ? candidates : [known];
  }

  return {
    mode,
    async checkSuggestionWrite(recordId, suggestion, at) {
      const candidates = await datasetsOfRecord(recordId);
      if (candidates.length === 0) return undefinedDataset('the dataset of this record has no definition (the server runs with DATASETS=strict)');
      // With several candidates (a fingerprint shared, the record still queued) one that takes it is enough, as for a response.
      const problems = candidates.map((c) => c.checkSuggestion(suggestion.question, suggestion.value, at));
      if (problems.some((p) => p.length === 0)) return;
      refuse(problems[0]!);
    },
    checkRecordWrite(datasetId, fieldToValue, response, suggestions = [], at = (i) => `suggestions[${i}]`) {
      const dataset = registry.byId(datasetId);
      if (dataset === undefined) return undefinedDataset(`the dataset ${JSON.stringify(datasetId)} has no definition (the server runs with DATASETS=strict)`);
      const problems = [
        ...dataset.checkRecord(fieldToValue),
        ...dataset.checkResponse(response.values, response.status),
        ...suggestions.flatMap((s, i) => dataset.checkSuggestion(s.question, s.value, at(i))),
      ];
      if (problems.length > 0) refuse(problems);
    },
    async checkResponseWrite(recordId, response) {
      const fingerprint = ids.recordFingerprint(recordId);
      const candidates = fingerprint === undefined ? [] : registry.byFingerprint(fingerprint);
      if (candidates.length === 1) return checkResponse(candidates[0]!, response);
      if (candidates.length === 0) return undefinedDataset('the dataset of this record has no definition (the server runs with DATASETS=strict)');
      const stored = await recordDataset(recordId);
      const known = stored === undefined ? undefined : candidates.find((c) => c.definition.id === stored);
      if (known !== undefined) return checkResponse(known, response);
      const problems = candidates.map((c) => c.checkResponse(response.values, response.status));
      if (problems.some((p) => p.length === 0)) return;
      refuse(problems[0]!);
    },
  };
}

/** The gate of an app built without dataset definitions (the benchmark's peers): today's rules only. */
export const NO_DATASET_GATE: DatasetGate = Object.freeze({
  mode: 'open',
  checkRecordWrite: () => undefined,
  checkResponseWrite: () => Promise.resolve(),
  checkSuggestionWrite: () => Promise.resolve(),
});
