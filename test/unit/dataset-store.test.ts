import { expect } from 'chai';
import { createDatasetGate } from '../../api/dataset-gate.js';
import { createDatasetStore, type DatasetRegistry } from '../../api/dataset-store.js';
import { compileDataset } from '../../api/dataset-validators.js';
import type { DatasetAdmin } from '../../shared/dataset-admin.js';
import type { DatasetDefinition } from '../../shared/dataset-definition.js';
import { isAppError } from '../../shared/errors.js';
import { createIdMinter, type IdMinter } from '../../shared/ids.js';
import { silentLogger } from '../helpers/stack.js';

/*
 * Pure logic of the in-memory definitions: what a failed load keeps, when a definition is
 * compiled again, and how a response finds its dataset when fingerprints collide. The admin and
 * the registry are stand-ins; the HTTP tests run the real ones on FerretDB.
 */

function definition(id: string, ratingValues: number[], updatedAt = '2026-01-01T00:00:00.000Z'): DatasetDefinition {
  return {
    id,
    fields: [{ name: 'text', type: 'text', required: true }],
    questions: [{ name: 'rating', type: 'rating', values: ratingValues, required: true }],
    created_at: '2026-01-01T00:00:00.000Z',
    updated_at: updatedAt,
  };
}

function fakeAdmin(): DatasetAdmin & { definitions: DatasetDefinition[]; failing: boolean } {
  const admin = {
    definitions: [] as DatasetDefinition[],
    failing: false,
    put: () => Promise.reject(new Error('not used')),
    get: () => Promise.reject(new Error('not used')),
    list: () => Promise.reject(new Error('not used')),
    all: () => (admin.failing ? Promise.reject(new Error('MongoDB is down')) : Promise.resolve({ definitions: [...admin.definitions], invalid: [] })),
  };
  return admin;
}

async function refusal(promise: Promise<unknown> | unknown): Promise<string | undefined> {
  try {
    await promise;
    return undefined;
  } catch (err) {
    if (!isAppError(err)) throw err;
    return err.code;
  }
}

describe('dataset store (definitions held in memory)', () => {
  const ids = createIdMinter(['unit-test-secret-0123456789']);

  it('keeps the last loaded definitions while MongoDB does not answer, and loads again after', async () => {
    const admin = fakeAdmin();
    admin.definitions = [definition('ds_a', [1, 2])];
    const store = createDatasetStore({ admin, ids, refreshMs: 60_000, logger: silentLogger });
    expect(await store.refresh()).to.equal(true);
    admin.failing = true;
    expect(await store.refresh()).to.equal(false);
    expect(store.byId('ds_a')?.definition.id).to.equal('ds_a');
    expect(store.byFingerprint(ids.recordFingerprint(ids.newRecordId('ds_a'))!)).to.have.length(1);
    admin.failing = false;
    admin.definitions = [];
    expect(await store.refresh()).to.equal(true);
    expect(store.byId('ds_a'), 'a deleted definition goes with the next load').to.equal(undefined);
    await store.close();
  });

  it('compiles a definition again only when its updated_at changed', async () => {
    const admin = fakeAdmin();
    admin.definitions = [definition('ds_a', [1, 2])];
    const store = createDatasetStore({ admin, ids, refreshMs: 60_000, logger: silentLogger });
    await store.refresh();
    const first = store.byId('ds_a');
    await store.refresh();
    expect(store.byId('ds_a')).to.equal(first);
    admin.definitions = [definition('ds_a', [1, 2, 3], '2026-01-02T00:00:00.000Z')];
    await store.refresh();
    expect(store.byId('ds_a')).to.not.equal(first);
    expect(store.byId('ds_a')!.checkResponse({ rating: 3 }, 'submitted')).to.deep.equal([]);
    await store.close();
  });

  it('indexes a dataset under the fingerprint of every signing secret (ids minted before a rotation)', async () => {
    const old = createIdMinter(['old-secret-0123456789abcdef']);
    const rotated = createIdMinter(['new-secret-0123456789abcdef', 'old-secret-0123456789abcdef']);
    const admin = fakeAdmin();
    admin.definitions = [definition('ds_a', [1])];
    const store = createDatasetStore({ admin, ids: rotated, refreshMs: 60_000, logger: silentLogger });
    await store.refresh();
    expect(store.byFingerprint(rotated.recordFingerprint(old.newRecordId('ds_a'))!).map((c) => c.definition.id)).to.deep.equal(['ds_a']);
    expect(store.byFingerprint(rotated.recordFingerprint(rotated.newRecordId('ds_a'))!).map((c) => c.definition.id)).to.deep.equal(['ds_a']);
    await store.close();
  });
});

describe('dataset gate (fingerprint collisions)', () => {
  // Two datasets that share a fingerprint: the registry stand-in answers both for any record.
  const a = compileDataset(definition('ds_a', [1, 2]));
  const b = compileDataset(definition('ds_b', [8, 9]));
  const colliding: DatasetRegistry = { byId: (id) => (id === 'ds_a' ? a : id === 'ds_b' ? b : undefined), byFingerprint: () => [a, b], size: 2, loaded: () => true };
  const ids: IdMinter = createIdMinter(['unit-test-secret-0123456789']);
  const recordId = ids.newRecordId('ds_a');

  it('looks the record up in MongoDB and checks against its own dataset only', async () => {
    const lookups: string[] = [];
    const gate = createDatasetGate({ registry: colliding, ids, mode: 'open', recordDataset: (id) => (lookups.push(id), Promise.resolve('ds_a')) });
    expect(await refusal(gate.checkResponseWrite(recordId, { status: 'submitted', values: { rating: 1 } }))).to.equal(undefined);
    expect(await refusal(gate.checkResponseWrite(recordId, { status: 'submitted', values: { rating: 9 } })), 'valid for ds_b only').to.equal('validation_failed');
    expect(lookups).to.deep.equal([recordId, recordId]);
  });

  it('a record not stored yet passes when it is valid for one of the candidates, and is refused when valid for none', async () => {
    const gate = createDatasetGate({ registry: colliding, ids, mode: 'strict', recordDataset: () => Promise.resolve(undefined) });
    expect(await refusal(gate.checkResponseWrite(recordId, { status: 'submitted', values: { rating: 9 } }))).to.equal(undefined);
    expect(await refusal(gate.checkResponseWrite(recordId, { status: 'submitted', values: { rating: 5 } }))).to.equal('validation_failed');
  });

  it('without a collision, no lookup is made', async () => {
    const single: DatasetRegistry = { byId: () => a, byFingerprint: () => [a], size: 1, loaded: () => true };
    const gate = createDatasetGate({ registry: single, ids, mode: 'open', recordDataset: () => Promise.reject(new Error('no lookup expected')) });
    expect(await refusal(gate.checkResponseWrite(recordId, { status: 'submitted', values: { rating: 2 } }))).to.equal(undefined);
    expect(await refusal(gate.checkResponseWrite(recordId, { status: 'submitted', values: { rating: 3 } }))).to.equal('validation_failed');
  });
});

describe('dataset gate (definitions not loaded yet)', () => {
  const ids: IdMinter = createIdMinter(['unit-test-secret-0123456789']);
  const empty = (loaded: boolean): DatasetRegistry => ({ byId: () => undefined, byFingerprint: () => [], size: 0, loaded: () => loaded });
  const write = (gate: ReturnType<typeof createDatasetGate>) => refusal(Promise.resolve().then(() => gate.checkRecordWrite('ds_a', { prompt: 'x' }, { status: 'submitted', values: { rating: 1 } })));
  const response = (gate: ReturnType<typeof createDatasetGate>) => refusal(gate.checkResponseWrite(ids.newRecordId('ds_a'), { status: 'submitted', values: { rating: 1 } }));

  it('strict: 503 store_unavailable while no load has succeeded (the dataset may be defined), 404 dataset_not_found once one has', async () => {
    const before = createDatasetGate({ registry: empty(false), ids, mode: 'strict', recordDataset: () => Promise.resolve(undefined) });
    expect(await write(before)).to.equal('store_unavailable');
    expect(await response(before)).to.equal('store_unavailable');
    const after = createDatasetGate({ registry: empty(true), ids, mode: 'strict', recordDataset: () => Promise.resolve(undefined) });
    expect(await write(after)).to.equal('dataset_not_found');
    expect(await response(after)).to.equal('dataset_not_found');
  });

  it('open: takes the write either way', async () => {
    const gate = createDatasetGate({ registry: empty(false), ids, mode: 'open', recordDataset: () => Promise.resolve(undefined) });
    expect(await write(gate)).to.equal(undefined);
    expect(await response(gate)).to.equal(undefined);
  });
});
