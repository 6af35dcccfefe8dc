import { randomUUID } from 'node:crypto';
import type { Db } from 'mongodb';
import { COLLECTIONS } from '../shared/mongo.js';
import { insertNew } from './inserts.js';

/**
 * One claim on a response for one lease epoch. Its _id is unique per (response, epoch): an insert
 * with a unique _id is the one operation FerretDB v1 applies atomically, so whoever inserts it
 * holds it; nobody else deletes it (see {@link createLeases}).
 */
interface LeaseDoc {
  _id: string;
  epoch: number;
  owner: string;
  taken_at: Date;
}

interface LeaseGrant {
  /** Response ids now held by this writer. */
  readonly held: readonly string[];
  /** Response ids another writer holds. */
  readonly busy: readonly string[];
  /** Until when (ms since the epoch) no other writer can hold what was granted. */
  readonly validUntil: number;
  /** Gives the held ids back. */
  release(): Promise<void>;
}

interface Leases {
  acquire(responseIds: readonly string[]): Promise<LeaseGrant>;
  /** Removes claims left by writers that died holding them (all long expired). */
  sweep(): Promise<void>;
}

/**
 * Mutual exclusion for response updates on a store whose conditional update is not atomic.
 * Time is cut into epochs of `leaseMs`; a writer in epoch e claims (response, e) and
 * (response, e+1). Any writer in epoch e+1 needs (response, e+1) and so waits; one in epoch e+2
 * claims other ids. A grant is therefore exclusive until epoch e+2 begins: at least `leaseMs`
 * after it was taken, and the writer stops updating before then. A claim of a dead writer blocks
 * its response for at most 2 × `leaseMs`, and expires without anyone deleting it (a delete is not
 * atomic on FerretDB, so no writer ever deletes a claim it does not hold, except the sweep of
 * epochs nobody can hold any more).
 */
export function createLeases(options: { db: Db; leaseMs: number; now?: () => number }): Leases {
  const { leaseMs } = options;
  const now = options.now ?? Date.now;
  const col = options.db.collection<LeaseDoc>(COLLECTIONS.responseLeases);
  const owner = randomUUID();
  const idOf = (responseId: string, epoch: number) => `${responseId}@${epoch}`;

  return {
    async acquire(responseIds) {
      const epoch = Math.floor(now() / leaseMs);
      const validUntil = (epoch + 2) * leaseMs;
      const taken_at = new Date();
      const docs = responseIds.flatMap((id) => [epoch, epoch + 1].map((e) => ({ _id: idOf(id, e), epoch: e, owner, taken_at })));
      const outcomes = await insertNew(col, docs);
      // "Present" may be our own claim when insertNew had to go one by one (an error without
      // per-document detail): the claims inserted before it then meet themselves. The owner tells.
      const present = docs.filter((_, i) => outcomes[i]!.kind === 'present').map((d) => d._id);
      const ownPresent = new Set(present.length === 0 ? [] : (await col.find({ _id: { $in: present }, owner }, { projection: { _id: 1 } }).toArray()).map((d) => d._id));
      const isMine = (i: number) => outcomes[i]!.kind === 'inserted' || ownPresent.has(docs[i]!._id);
      const held: string[] = [];
      const busy: string[] = [];
      const giveBack: string[] = [];
      responseIds.forEach((id, i) => {
        const mine = [2 * i, 2 * i + 1].map((k) => (isMine(k) ? docs[k]!._id : undefined));
        if (mine[0] !== undefined && mine[1] !== undefined) held.push(id);
        else {
          busy.push(id);
          for (const leaseId of mine) if (leaseId !== undefined) giveBack.push(leaseId);
        }
      });
      if (giveBack.length > 0) await col.deleteMany({ _id: { $in: giveBack } });
      const heldLeaseIds = held.flatMap((id) => [idOf(id, epoch), idOf(id, epoch + 1)]);
      return {
        held,
        busy,
        validUntil,
        async release() {
          if (heldLeaseIds.length > 0) await col.deleteMany({ _id: { $in: heldLeaseIds } });
        },
      };
    },
    async sweep() {
      // A claim of epoch e is exclusive until epoch e+1 ends: claims older than that are dead.
      await col.deleteMany({ epoch: { $lt: Math.floor(now() / leaseMs) - 1 } });
    },
  };
}
