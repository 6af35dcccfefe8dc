import { expect } from 'chai';
import { MongoBulkWriteError, MongoNetworkError, MongoServerError, MongoWriteConcernError, type BulkWriteResult } from 'mongodb';
import { isTransientMongoError, sqlStateCode, TRANSIENT_CODES } from '../../worker/errors.js';
import { insertOutcomes } from '../../worker/inserts.js';

/**
 * The parts of a BulkWriteResult the classification and the writer read (the driver does not
 * export its constructor): per-document errors and the write concern error, if any.
 */
function bulkResult(o: { writeErrors?: { index: number; code: number; errmsg: string }[]; writeConcern?: { code: number; errmsg: string }; nInserted?: number }): BulkWriteResult {
  const writeErrors = o.writeErrors ?? [];
  return {
    insertedCount: o.nInserted ?? 0,
    getWriteErrors: () => writeErrors,
    getWriteConcernError: () => o.writeConcern,
  } as unknown as BulkWriteResult;
}

/** A server error as the driver builds it from a reply `{ok: 0, code, errmsg, errorLabels}`. */
function serverError(code: number, errorLabels: string[] = []): MongoServerError {
  return new MongoServerError({ ok: 0, code, errmsg: `error ${code}`, errorLabels } as never);
}

describe('store error classification (worker/errors.ts)', () => {
  it("a PostgreSQL deadlock, serialization failure or lock timeout as FerretDB v2 / DocumentDB report them (the SQLSTATE packed as a number) is transient", () => {
    // 16908292 is what the stand-in answered for "deadlock detected" (bench: two unordered bulks locking documents in opposite orders).
    expect(sqlStateCode('40P01')).to.equal(16908292);
    for (const state of ['40P01', '40001', '55P03', '57014', '57P01', '53100', '53300']) expect(isTransientMongoError(serverError(sqlStateCode(state))), state).to.equal(true);
    // Refusals of the data stay refusals: unique_violation, 54000 program_limit_exceeded, 22P02 invalid text,
    // and DocumentDB's own code for a document over the limit (M003A, seen as 285999133).
    for (const state of ['23505', '54000', '22P02', 'M003A']) expect(isTransientMongoError(serverError(sqlStateCode(state))), state).to.equal(false);
    expect(sqlStateCode('M003A')).to.equal(285999133);
  });

  it('a replica-set election or step-down is transient, by code', () => {
    // NotWritablePrimary, PrimarySteppedDown, InterruptedDueToReplStateChange, NotPrimaryNoSecondaryOk,
    // NotPrimaryOrSecondary, LegacyNotPrimary, ShutdownInProgress, InterruptedAtShutdown.
    for (const code of [10107, 189, 11602, 13435, 13436, 10058, 91, 11600]) {
      expect(isTransientMongoError(serverError(code)), `code ${code}`).to.equal(true);
    }
  });

  it('an error labelled RetryableWriteError or TransientTransactionError is transient, whatever its code', () => {
    expect(isTransientMongoError(serverError(1, ['RetryableWriteError']))).to.equal(true);
    expect(isTransientMongoError(serverError(1, ['TransientTransactionError']))).to.equal(true);
    expect(isTransientMongoError(serverError(1))).to.equal(false);
  });

  it('network errors are transient', () => {
    expect(isTransientMongoError(new MongoNetworkError('connection 3 to 10.0.0.1:27017 closed'))).to.equal(true);
  });

  it('a write concern error is transient, whatever its code (the write may stand on the primary alone)', () => {
    const wtimeout = new MongoWriteConcernError({ writeConcernError: { code: 64, errmsg: 'waiting for replication timed out' } } as never);
    expect(isTransientMongoError(wtimeout)).to.equal(true);
    const unsatisfiable = new MongoWriteConcernError({ writeConcernError: { code: 100, errmsg: 'Not enough data-bearing nodes' } } as never);
    expect(isTransientMongoError(unsatisfiable)).to.equal(true);
  });

  it('a bulk with per-document errors and a write concern error is transient: the applied documents are not confirmed', () => {
    const result = bulkResult({ writeErrors: [{ index: 1, code: 11000, errmsg: 'dup' }], writeConcern: { code: 64, errmsg: 'waiting for replication timed out' }, nInserted: 2 });
    const err = new MongoBulkWriteError({ message: 'dup', code: 11000, writeErrors: result.getWriteErrors() } as never, result);
    expect(isTransientMongoError(err)).to.equal(true);
  });

  it('a bulk whose only errors are per-document refusals or duplicates is not transient (decided per document)', () => {
    const result = bulkResult({ writeErrors: [{ index: 0, code: 11000, errmsg: 'dup' }, { index: 1, code: 2, errmsg: 'bad value' }], nInserted: 1 });
    const err = new MongoBulkWriteError({ message: 'dup', code: 11000, writeErrors: result.getWriteErrors() } as never, result);
    expect(isTransientMongoError(err)).to.equal(false);
  });

  it('FerretDB v2 losing its PostgreSQL backend (code 1 and the connection\'s failure, as seen with a backend killed under load) is transient, as a command error and as a bulk error', () => {
    const seen = ['unexpected EOF', 'the database system is in recovery mode', 'the database system is not yet accepting connections', 'terminating connection due to administrator command', 'the database system is shutting down'];
    for (const errmsg of seen) {
      expect(isTransientMongoError(new MongoServerError({ ok: 0, code: 1, errmsg } as never)), errmsg).to.equal(true);
      // As the stand-in answered an insertMany: a bulk error with no per-document errors.
      const empty = bulkResult({});
      expect(isTransientMongoError(new MongoBulkWriteError({ message: errmsg, code: 1, writeErrors: [] } as never, empty)), `bulk: ${errmsg}`).to.equal(true);
      // And should it report the loss per document: not a refusal of those documents.
      const perDoc = bulkResult({ writeErrors: [{ index: 0, code: 1, errmsg }], nInserted: 1 });
      expect(insertOutcomes(new MongoBulkWriteError({ message: errmsg, code: 1, writeErrors: perDoc.getWriteErrors() } as never, perDoc), 2), `per document: ${errmsg}`).to.equal(undefined);
    }
    // Code 1 with any other text stays a refusal: the store's own internal error about the data.
    expect(isTransientMongoError(new MongoServerError({ ok: 0, code: 1, errmsg: 'invalid document' } as never))).to.equal(false);
  });

  it('refusals of the data and bugs are not transient', () => {
    for (const code of [11000, 2, 17419, 10334, 121]) expect(isTransientMongoError(serverError(code)), `code ${code}`).to.equal(false);
    expect(isTransientMongoError(new TypeError('a bug'))).to.equal(false);
  });

  it('no code is both transient and a refusal the writer decides per document', () => {
    expect(TRANSIENT_CODES.has(11000)).to.equal(false);
  });
});
