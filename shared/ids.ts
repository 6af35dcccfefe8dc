import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

const RECORD_PREFIX = 'rec_';
const RESPONSE_PREFIX = 'rsp_';
const BODY_BYTES = 16;
const TAG_BYTES = 9;
/** Length of a record id: prefix + 22 base64url chars of body + 12 of tag. */
export const RECORD_ID_LENGTH = RECORD_PREFIX.length + 22 + 12;

export interface IdMinter {
  /** A new record id: 48-bit time + 80 random bits, so ids sort roughly by creation. */
  newRecordId(): string;
  /** A record id derived from `seed` (an idempotent retry gets the same id). */
  recordIdFromSeed(seed: string): string;
  /**
   * True when `id` was minted by a process holding one of the secrets. Ids are disclosed only in
   * a 200, so a valid tag proves the record was accepted: it is stored or still queued.
   */
  isMintedRecordId(id: string): boolean;
  /** The response id of a (record, annotator) pair; stable, so updates keep it. */
  responseId(recordId: string, userId: string): string;
}

/**
 * Mints signed record ids. The first secret signs; every secret verifies, so secrets can be
 * rotated by prepending a new one and removing the old one after its ids no longer arrive.
 */
export function createIdMinter(secrets: readonly string[]): IdMinter {
  const [signer] = secrets;
  if (signer === undefined) throw new Error('createIdMinter needs at least one secret');
  const tag = (secret: string, body: Buffer): Buffer =>
    createHmac('sha256', secret).update('record-id\0').update(body).digest().subarray(0, TAG_BYTES);
  const encode = (body: Buffer): string => RECORD_PREFIX + body.toString('base64url') + tag(signer, body).toString('base64url');

  return {
    newRecordId() {
      const body = randomBytes(BODY_BYTES);
      body.writeUIntBE(Date.now(), 0, 6);
      return encode(body);
    },
    recordIdFromSeed(seed) {
      return encode(createHash('sha256').update('record-seed\0').update(seed).digest().subarray(0, BODY_BYTES));
    },
    isMintedRecordId(id) {
      if (id.length !== RECORD_ID_LENGTH || !id.startsWith(RECORD_PREFIX)) return false;
      const body = Buffer.from(id.slice(RECORD_PREFIX.length, RECORD_PREFIX.length + 22), 'base64url');
      const given = Buffer.from(id.slice(RECORD_PREFIX.length + 22), 'base64url');
      if (body.length !== BODY_BYTES || given.length !== TAG_BYTES) return false;
      // base64url decoding ignores unused bits and accepts + and /: only the canonical spelling counts.
      if (RECORD_PREFIX + body.toString('base64url') + given.toString('base64url') !== id) return false;
      let ok = false;
      for (const secret of secrets) ok = timingSafeEqual(tag(secret, body), given) || ok;
      return ok;
    },
    responseId(recordId, userId) {
      const digest = createHash('sha256').update('response\0').update(recordId).update('\0').update(userId).digest();
      return RESPONSE_PREFIX + digest.subarray(0, BODY_BYTES).toString('base64url');
    },
  };
}
