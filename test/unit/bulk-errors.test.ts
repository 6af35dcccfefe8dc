import { expect } from 'chai';
import { MongoBulkWriteError, type BulkWriteResult } from 'mongodb';
import { insertOutcomes } from '../../worker/inserts.js';
import { updateAttempts } from '../../worker/updates.js';

/** The error the driver throws for an unordered bulk with per-operation errors (as MongoDB reports them). */
function bulkError(errors: { index: number; code: number; errmsg: string }[], result: Partial<BulkWriteResult> = {}): MongoBulkWriteError {
  return new MongoBulkWriteError({ message: 'bulk failed', code: errors[0]?.code ?? 0, writeErrors: errors as never }, result as BulkWriteResult);
}

describe('per-operation errors of an unordered bulk', () => {
  it('insertNew: a duplicate is "present", another code is "rejected" with its message, the rest inserted', () => {
    const out = insertOutcomes(bulkError([{ index: 1, code: 11000, errmsg: 'dup' }, { index: 3, code: 2, errmsg: 'cannot store' }], { insertedCount: 3 }), 5);
    expect(out).to.deep.equal([{ kind: 'inserted' }, { kind: 'present' }, { kind: 'inserted' }, { kind: 'rejected', error: 'cannot store' }, { kind: 'inserted' }]);
  });

  it('updates: a duplicate key is a conflict to re-check, another code is rejected, the rest applied (matched or upserted)', () => {
    const out = updateAttempts(bulkError([{ index: 0, code: 11000, errmsg: 'dup' }, { index: 2, code: 17419, errmsg: 'too large' }], { matchedCount: 0, upsertedCount: 1 }), 3);
    expect(out).to.deep.equal([{ kind: 'conflict' }, { kind: 'applied' }, { kind: 'rejected', error: 'too large' }]);
  });

  it('an operation aborted by a deadlock is not refused: the error does not settle the command (the caller repeats its operations)', () => {
    const deadlock = { index: 1, code: 16908292, errmsg: 'deadlock detected' };
    expect(updateAttempts(bulkError([deadlock], { matchedCount: 2, upsertedCount: 0 }), 3)).to.equal(undefined);
    expect(insertOutcomes(bulkError([{ index: 0, code: 11000, errmsg: 'dup' }, deadlock], { insertedCount: 1 }), 3)).to.equal(undefined);
  });

  it('ignores indexes outside the command', () => {
    expect(updateAttempts(bulkError([{ index: 7, code: 11000, errmsg: 'dup' }], { matchedCount: 1, upsertedCount: 0 }), 2)).to.deep.equal([{ kind: 'applied' }, { kind: 'applied' }]);
  });

  it('trusts per-operation errors only when they and the applied count cover every operation', () => {
    // A connection lost mid-command: a bulk error without any per-document error.
    expect(insertOutcomes(bulkError([], { insertedCount: 0 }), 3)).to.equal(undefined);
    // A store that stopped at its first error (the rest neither inserted nor reported).
    expect(insertOutcomes(bulkError([{ index: 1, code: 11000, errmsg: 'dup' }], { insertedCount: 1 }), 4)).to.equal(undefined);
    expect(insertOutcomes(bulkError([{ index: 1, code: 11000, errmsg: 'dup' }], { insertedCount: 3 }), 4)).to.have.length(4);
    expect(updateAttempts(bulkError([{ index: 1, code: 11000, errmsg: 'dup' }], { matchedCount: 1, upsertedCount: 0 }), 4)).to.equal(undefined);
    expect(insertOutcomes(new Error('other'), 4)).to.equal(undefined);
  });
});
