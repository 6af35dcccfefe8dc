import type { Collection } from 'mongodb';
import { AppError } from '../../shared/errors.js';
import { erasureView, isIssuedErasureId, type ErasureDoc } from '../../shared/erasures.js';
import type { IdMinter } from '../../shared/ids.js';
import type { ApiParamsContext } from '../state.js';
import { fromStore } from './reads.js';

/** `POST` is the write kind of api/erasure-kind.ts; `GET /admin/erasures/{id}` is here (admin scope). */
export const ERASURES_PATH = '/admin/erasures';

export interface ErasureRouteDeps {
  readonly erasures: Collection<ErasureDoc>;
  readonly ids: IdMinter;
  readonly retryAfterSeconds: number;
  /** The bound of the read (api/routes/reads.ts `fromStore`). */
  readonly readTimeoutMs?: number;
}

/**
 * `GET /admin/erasures/:id`: the worker's document of the erasure; none yet while the erasure is
 * still queued (`pending`, an id this service issued) or never was (404).
 */
export function getErasure(deps: ErasureRouteDeps) {
  return async (ctx: ApiParamsContext): Promise<void> => {
    const id = ctx.params['id']!;
    if (!isIssuedErasureId(deps.ids, id)) throw new AppError('not_found', `no erasure has the id ${JSON.stringify(id)}`);
    const doc = await fromStore(deps, () => deps.erasures.findOne({ _id: id }));
    ctx.body = erasureView(id, doc);
  };
}
