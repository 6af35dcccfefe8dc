import { expect } from 'chai';
import { MongoBulkWriteError, type BulkWriteResult } from 'mongodb';
import { accountsForEveryDocument, fromBulkError } from '../../worker/inserts.js';
import { attemptsFromBulkError } from '../../worker/updates.js';

/** The error the driver throws for an unordered bulk with per-operation errors (as MongoDB reports them). */
function bulkError(errors: { index: number; code: number; errmsg: string }[], result: Partial<BulkWriteResult> = {}): MongoBulkWriteError {
  return new MongoBulkWriteError({ message: 'bulk failed', code: errors[0]?.code ?? 0, writeErrors: errors as never }, result as BulkWriteResult);
}

describe('per-operation errors of an unordered bulk', () => {
  it('insertNew: a duplicate is "present", another code is "rejected" with its message, the rest inserted', () => {
    const out = fromBulkError(bulkError([{ index: 1, code: 11000, errmsg: 'dup' }, { index: 3, code: 2, errmsg: 'cannot store' }]), 5);
    expect(out).to.deep.equal([{ kind: 'inserted' }, { kind: 'present' }, { kind: 'inserted' }, { kind: 'rejected', error: 'cannot store' }, { kind: 'inserted' }]);
  });

  it('updates: a duplicate key is a conflict to re-check, another code is rejected, the rest applied', () => {
    const out = attemptsFromBulkError(bulkError([{ index: 0, code: 11000, errmsg: 'dup' }, { index: 2, code: 17419, errmsg: 'too large' }]), 3);
    expect(out).to.deep.equal([{ kind: 'conflict' }, { kind: 'applied' }, { kind: 'rejected', error: 'too large' }]);
  });

  it('ignores indexes outside the command', () => {
    expect(attemptsFromBulkError(bulkError([{ index: 7, code: 11000, errmsg: 'dup' }]), 2)).to.deep.equal([{ kind: 'applied' }, { kind: 'applied' }]);
  });

  it('trusts per-document errors only when they and the inserted count cover every document', () => {
    // A connection lost mid-command: a bulk error without any per-document error.
    expect(accountsForEveryDocument(bulkError([], { insertedCount: 0 }), 3)).to.equal(false);
    // A store that stopped at its first error (the rest neither inserted nor reported).
    expect(accountsForEveryDocument(bulkError([{ index: 1, code: 11000, errmsg: 'dup' }], { insertedCount: 1 }), 4)).to.equal(false);
    expect(accountsForEveryDocument(bulkError([{ index: 1, code: 11000, errmsg: 'dup' }], { insertedCount: 3 }), 4)).to.equal(true);
    expect(accountsForEveryDocument(new Error('other'), 4)).to.equal(false);
  });
});
