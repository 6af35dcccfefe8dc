import { randomFillSync, timingSafeEqual } from 'node:crypto';
import { hmacSha256, sha256 } from './digest.js';

const RECORD_PREFIX = 'rec_';
const RESPONSE_PREFIX = 'rsp_';
const SUGGESTION_PREFIX = 'sug_';
const BODY_BYTES = 16;
const TAG_BYTES = 9;
/** What a record id's tag is an HMAC of, before the id's body: keeps the tag apart from any other use of the secret. */
const TAG_CONTEXT = Buffer.from('record-id\0', 'latin1');
/** Where in the body the dataset fingerprint sits: after the 6-byte time prefix. */
const FINGERPRINT_OFFSET = 6;
const FINGERPRINT_BYTES = 4;
/** Where the random bits sit: the rest of the body, after time and fingerprint. */
const RANDOM_OFFSET = FINGERPRINT_OFFSET + FINGERPRINT_BYTES;
const RANDOM_BYTES = BODY_BYTES - RANDOM_OFFSET;
/** Ids whose random bits one draw from the OS serves (randomFillSync is a system call). */
const POOL_IDS = 512;
/** Datasets whose fingerprint is kept (an HMAC per record otherwise); a key writes to few. */
const FINGERPRINT_CACHE_MAX = 1024;
/** Length of a record id: prefix + 22 base64url chars of body + 12 of tag. */
export const RECORD_ID_LENGTH = RECORD_PREFIX.length + 22 + 12;

export interface IdMinter {
  /**
   * A new record id of `datasetId`: 48-bit time + 32-bit dataset fingerprint + 48 random bits,
   * so ids sort roughly by creation and say which dataset they belong to (see {@link datasetMatches}).
   */
  newRecordId(datasetId: string): string;
  /** A record id of `datasetId` derived from `seed` (an idempotent retry gets the same id). */
  recordIdFromSeed(seed: string, datasetId: string): string;
  /**
   * True when `id` was minted by a process holding one of the secrets. Ids are disclosed only in
   * a 200, so a valid tag proves the record was accepted: it is stored or still queued.
   */
  isMintedRecordId(id: string): boolean;
  /**
   * True when the dataset fingerprint inside `recordId` is `datasetId`'s under one of the secrets.
   * Lets the API check a scoped key against a record that may still be queued (not in MongoDB).
   * Ids minted before fingerprints existed match no dataset. Does not check the tag: call
   * {@link isMintedRecordId} for that.
   */
  datasetMatches(recordId: string, datasetId: string): boolean;
  /**
   * The fingerprints `datasetId` has under each secret (the signer's first), as unsigned 32-bit
   * numbers: an index built from them finds a record's dataset among known ones without a store read.
   */
  datasetFingerprints(datasetId: string): readonly number[];
  /** The dataset fingerprint inside a well-formed record id, or undefined. Does not check the tag. */
  recordFingerprint(recordId: string): number | undefined;
  /** The response id of a (record, annotator) pair; stable, so updates keep it. */
  responseId(recordId: string, userId: string): string;
  /** The suggestion id of a (record, question, agent): stable, so a later suggestion replaces it. */
  suggestionId(recordId: string, question: string, agent: string): string;
}

/**
 * Mints signed record ids. The first secret signs; every secret verifies, so secrets can be
 * rotated by prepending a new one and removing the old one after its ids no longer arrive.
 */
export function createIdMinter(secrets: readonly string[]): IdMinter {
  if (secrets.length === 0) throw new Error('createIdMinter needs at least one secret');
  // Padded once per secret (shared/digest.ts): an HMAC object per id costs more than the hashing.
  const keys = secrets.map((secret) => hmacSha256(Buffer.from(secret, 'utf8')));
  const signer = keys[0]!;
  type Mac = (typeof keys)[number];
  // The message of a tag, 'record-id\0' + body, rebuilt in place for each id.
  const tagMessage = Buffer.alloc(TAG_CONTEXT.length + BODY_BYTES);
  TAG_CONTEXT.copy(tagMessage);
  const tag = (secret: Mac, body: Buffer): Buffer => {
    body.copy(tagMessage, TAG_CONTEXT.length);
    return secret(tagMessage).subarray(0, TAG_BYTES);
  };
  // Keyed by a secret so that a client cannot compute which fingerprint a dataset has.
  const fingerprint = (secret: Mac, datasetId: string): Buffer =>
    secret(Buffer.from(`dataset\0${datasetId}`, 'utf8')).subarray(0, FINGERPRINT_BYTES);
  const signerFingerprints = new Map<string, Buffer>();
  const signerFingerprint = (datasetId: string): Buffer => {
    let fp = signerFingerprints.get(datasetId);
    if (fp === undefined) {
      fp = fingerprint(signer, datasetId);
      if (signerFingerprints.size >= FINGERPRINT_CACHE_MAX) signerFingerprints.clear();
      signerFingerprints.set(datasetId, fp);
    }
    return fp;
  };
  // Random bits are drawn from the OS for POOL_IDS ids at once and handed out in turn.
  const pool = Buffer.allocUnsafe(RANDOM_BYTES * POOL_IDS);
  let poolOffset = pool.length;
  const randomInto = (body: Buffer): void => {
    if (poolOffset === pool.length) {
      randomFillSync(pool);
      poolOffset = 0;
    }
    pool.copy(body, RANDOM_OFFSET, poolOffset, poolOffset + RANDOM_BYTES);
    poolOffset += RANDOM_BYTES;
  };
  const encode = (body: Buffer, datasetId: string): string => {
    signerFingerprint(datasetId).copy(body, FINGERPRINT_OFFSET);
    return RECORD_PREFIX + body.toString('base64url') + tag(signer, body).toString('base64url');
  };
  /** Body and tag of a well-formed id, or undefined. */
  const decode = (id: string): { body: Buffer; given: Buffer } | undefined => {
    if (id.length !== RECORD_ID_LENGTH || !id.startsWith(RECORD_PREFIX)) return undefined;
    const body = Buffer.from(id.slice(RECORD_PREFIX.length, RECORD_PREFIX.length + 22), 'base64url');
    const given = Buffer.from(id.slice(RECORD_PREFIX.length + 22), 'base64url');
    if (body.length !== BODY_BYTES || given.length !== TAG_BYTES) return undefined;
    // base64url decoding ignores unused bits and accepts + and /: only the canonical spelling counts.
    if (RECORD_PREFIX + body.toString('base64url') + given.toString('base64url') !== id) return undefined;
    return { body, given };
  };

  return {
    newRecordId(datasetId) {
      const body = Buffer.allocUnsafe(BODY_BYTES);
      body.writeUIntBE(Date.now(), 0, 6);
      randomInto(body);
      return encode(body, datasetId);
    },
    recordIdFromSeed(seed, datasetId) {
      return encode(sha256(`record-seed\0${seed}`).subarray(0, BODY_BYTES), datasetId);
    },
    isMintedRecordId(id) {
      const decoded = decode(id);
      if (decoded === undefined) return false;
      let ok = false;
      for (const secret of keys) ok = timingSafeEqual(tag(secret, decoded.body), decoded.given) || ok;
      return ok;
    },
    datasetMatches(recordId, datasetId) {
      const decoded = decode(recordId);
      if (decoded === undefined) return false;
      const given = decoded.body.subarray(FINGERPRINT_OFFSET, FINGERPRINT_OFFSET + FINGERPRINT_BYTES);
      let ok = false;
      for (const secret of keys) ok = timingSafeEqual(fingerprint(secret, datasetId), given) || ok;
      return ok;
    },
    datasetFingerprints(datasetId) {
      return keys.map((secret) => fingerprint(secret, datasetId).readUInt32BE(0));
    },
    recordFingerprint(recordId) {
      return decode(recordId)?.body.readUInt32BE(FINGERPRINT_OFFSET);
    },
    responseId(recordId, userId) {
      const digest = sha256(`response\0${recordId}\0${userId}`);
      return RESPONSE_PREFIX + digest.subarray(0, BODY_BYTES).toString('base64url');
    },
    suggestionId(recordId, question, agent) {
      const digest = sha256(`suggestion\0${recordId}\0${question}\0${agent}`);
      return SUGGESTION_PREFIX + digest.subarray(0, BODY_BYTES).toString('base64url');
    },
  };
}
