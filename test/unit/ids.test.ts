import * as crypto from 'node:crypto';
import { expect } from 'chai';
import { createIdMinter, RECORD_ID_LENGTH } from '../../shared/ids.js';

const OLD = 'old-signing-secret-0123456789';
const NEW = 'new-signing-secret-9876543210';
const BASE64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

/** `id` with the character at `at` replaced. */
function replaceAt(id: string, at: number, ch: string): string {
  return `${id.slice(0, at)}${ch}${id.slice(at + 1)}`;
}

describe('record and response ids (shared/ids.ts)', () => {
  const minter = createIdMinter([OLD]);

  it('needs at least one secret', () => {
    expect(() => createIdMinter([])).to.throw();
  });

  it('mints unique ids of the documented shape that verify', () => {
    const ids = new Set<string>();
    for (let i = 0; i < 200; i++) {
      const id = minter.newRecordId('ds_a');
      expect(id).to.match(/^rec_[A-Za-z0-9_-]+$/);
      expect(id).to.have.length(RECORD_ID_LENGTH);
      expect(minter.isMintedRecordId(id), id).to.equal(true);
      ids.add(id);
    }
    expect(ids.size).to.equal(200);
  });

  it('a minter with the same secret (another API process) verifies the ids', () => {
    const id = minter.newRecordId('ds_a');
    expect(createIdMinter([OLD]).isMintedRecordId(id)).to.equal(true);
  });

  it('does not verify ids signed with another secret', () => {
    const foreign = createIdMinter(['some-other-secret-0123456']).newRecordId('ds_a');
    expect(minter.isMintedRecordId(foreign)).to.equal(false);
  });

  it('does not verify a tampered id (any changed character of body or tag)', () => {
    const id = minter.newRecordId('ds_a');
    for (let at = 'rec_'.length; at < id.length; at++) {
      const ch = id[at]!;
      // Flip the high bit of the 6-bit value, which every position uses.
      const other = BASE64URL[BASE64URL.indexOf(ch) ^ 32]!;
      expect(minter.isMintedRecordId(replaceAt(id, at, other)), `position ${at}`).to.equal(false);
    }
  });

  it('does not verify another spelling of a minted id (non-canonical base64url)', () => {
    // The 22nd body character carries 4 bits the 16-byte body does not use; a decoder that
    // ignores them would accept 16 spellings of each id, all but one naming no stored record.
    const id = minter.newRecordId('ds_a');
    const at = 'rec_'.length + 21;
    const variant = replaceAt(id, at, BASE64URL[BASE64URL.indexOf(id[at]!) ^ 1]!);
    expect(variant).to.not.equal(id);
    expect(minter.isMintedRecordId(variant)).to.equal(false);
  });

  it('does not verify an id spelled with the base64 alphabet (+ and /) instead of base64url', () => {
    let id = minter.newRecordId('ds_a');
    while (!/[-_]/.test(id.slice(4))) id = minter.newRecordId('ds_a');
    const variant = id.slice(0, 4) + id.slice(4).replace(/-/g, '+').replace(/_/g, '/');
    expect(minter.isMintedRecordId(variant)).to.equal(false);
  });

  it('rejects ids of the wrong shape', () => {
    const id = minter.newRecordId('ds_a');
    for (const bad of ['', 'rec_', id.slice(0, -1), `${id}A`, `rsp_${id.slice(4)}`, `REC_${id.slice(4)}`, ' '.repeat(id.length), `rec_${'!'.repeat(id.length - 4)}`]) {
      expect(minter.isMintedRecordId(bad), JSON.stringify(bad)).to.equal(false);
    }
  });

  describe('rotation', () => {
    const rotated = createIdMinter([NEW, OLD]);

    it('a minter with [new, old] verifies ids minted with old', () => {
      expect(rotated.isMintedRecordId(minter.newRecordId('ds_a'))).to.equal(true);
      expect(rotated.isMintedRecordId(minter.recordIdFromSeed('s', 'ds_a'))).to.equal(true);
    });

    it('signs with the first secret', () => {
      const id = rotated.newRecordId('ds_a');
      expect(createIdMinter([NEW]).isMintedRecordId(id)).to.equal(true);
      expect(createIdMinter([OLD]).isMintedRecordId(id)).to.equal(false);
    });

    it('ids of a removed secret no longer verify', () => {
      expect(createIdMinter([NEW]).isMintedRecordId(minter.newRecordId('ds_a'))).to.equal(false);
    });
  });

  describe('seeded ids', () => {
    it('are deterministic for a seed and secret, and verify', () => {
      const a = minter.recordIdFromSeed('tester\0key-1\0fp', 'ds_a');
      expect(minter.recordIdFromSeed('tester\0key-1\0fp', 'ds_a')).to.equal(a);
      expect(createIdMinter([OLD]).recordIdFromSeed('tester\0key-1\0fp', 'ds_a')).to.equal(a);
      expect(a).to.have.length(RECORD_ID_LENGTH);
      expect(minter.isMintedRecordId(a)).to.equal(true);
    });

    it('differ for another seed', () => {
      expect(minter.recordIdFromSeed('seed-a', 'ds_a')).to.not.equal(minter.recordIdFromSeed('seed-b', 'ds_a'));
    });
  });

  describe('dataset fingerprints (datasetMatches)', () => {
    it('a new id matches its own dataset and no other', () => {
      const id = minter.newRecordId('ds_a');
      expect(minter.datasetMatches(id, 'ds_a')).to.equal(true);
      expect(minter.datasetMatches(id, 'ds_b')).to.equal(false);
      expect(minter.datasetMatches(id, 'ds_a ')).to.equal(false);
      expect(minter.datasetMatches(id, '')).to.equal(false);
    });

    it('a seeded id carries its dataset too, and the seed decides the rest', () => {
      const a = minter.recordIdFromSeed('seed', 'ds_a');
      const b = minter.recordIdFromSeed('seed', 'ds_b');
      expect(a).to.not.equal(b);
      expect(minter.datasetMatches(a, 'ds_a')).to.equal(true);
      expect(minter.datasetMatches(a, 'ds_b')).to.equal(false);
      expect(minter.datasetMatches(b, 'ds_b')).to.equal(true);
      expect(minter.isMintedRecordId(b)).to.equal(true);
    });

    it('keeps the time prefix, so new ids still sort by creation', () => {
      const before = Date.now();
      const id = minter.newRecordId('ds_a');
      const ms = Buffer.from(id.slice(4, 26), 'base64url').readUIntBE(0, 6);
      expect(ms).to.be.within(before, Date.now());
    });

    it('is keyed by the secret: another secret gives another fingerprint', () => {
      const id = createIdMinter([NEW]).newRecordId('ds_a');
      expect(minter.datasetMatches(id, 'ds_a')).to.equal(false);
    });

    it('tries every secret (rotation)', () => {
      const rotated = createIdMinter([NEW, OLD]);
      expect(rotated.datasetMatches(minter.newRecordId('ds_a'), 'ds_a')).to.equal(true);
      expect(rotated.datasetMatches(rotated.newRecordId('ds_a'), 'ds_a')).to.equal(true);
      expect(rotated.datasetMatches(minter.newRecordId('ds_a'), 'ds_b')).to.equal(false);
    });

    it('an id minted before fingerprints existed (random body) matches no dataset', () => {
      // The old minter: 6-byte time + 10 random bytes, signed. Built here by hand with the same tag.
      const { createHmac, randomBytes } = crypto;
      const body = randomBytes(16);
      body.writeUIntBE(Date.now(), 0, 6);
      const tag = createHmac('sha256', OLD).update('record-id\0').update(body).digest().subarray(0, 9);
      const legacy = `rec_${body.toString('base64url')}${tag.toString('base64url')}`;
      expect(minter.isMintedRecordId(legacy)).to.equal(true);
      for (const ds of ['ds_a', 'ds_b', 'ds_test']) expect(minter.datasetMatches(legacy, ds)).to.equal(false);
    });

    it('matches nothing for ids of the wrong shape', () => {
      for (const bad of ['', 'rec_', 'rec_x', `rsp_${minter.newRecordId('ds_a').slice(4)}`]) expect(minter.datasetMatches(bad, 'ds_a')).to.equal(false);
    });
  });

  describe('response ids', () => {
    const rec = minter.newRecordId('ds_a');

    it('are stable per (record, user) pair, across minters', () => {
      const id = minter.responseId(rec, 'annotator-4');
      expect(minter.responseId(rec, 'annotator-4')).to.equal(id);
      expect(createIdMinter([NEW]).responseId(rec, 'annotator-4')).to.equal(id);
      expect(id).to.match(/^rsp_[A-Za-z0-9_-]+$/);
    });

    it('differ for another user or another record', () => {
      const id = minter.responseId(rec, 'annotator-4');
      expect(minter.responseId(rec, 'annotator-5')).to.not.equal(id);
      expect(minter.responseId(minter.newRecordId('ds_a'), 'annotator-4')).to.not.equal(id);
    });

    it('do not collide when the record/user boundary moves', () => {
      expect(minter.responseId('rec_ab', 'c')).to.not.equal(minter.responseId('rec_a', 'bc'));
    });
  });
});
