import { authenticatedKey, type ApiParamsContext, type ApiContext } from '../state.js';
import * as v from 'valibot';
import { DatasetDefinitionError, DatasetListQuery, type DatasetAdmin } from '../../shared/dataset-admin.js';
import { DatasetId } from '../../shared/schemas.js';
import { AppError } from '../../shared/errors.js';
import { parseQuery } from '../parse-input.js';
import { datasetJsonSchemas } from '../dataset-json-schema.js';
import type { DatasetSchemas } from '../answers.js';
import type { DatasetRegistry } from '../dataset-store.js';
import { mayWriteDataset } from '../scopes.js';

/** Where the dataset endpoints live. */
export const DATASETS_PATH = '/datasets';

export interface DatasetRouteDeps {
  readonly admin: DatasetAdmin;
  /** The definitions this process checks writes against (what `/schema` describes). */
  readonly registry: DatasetRegistry;
  /** Reloads `registry` now, so that this process applies a PUT at once (others within DATASETS_REFRESH_MS). */
  readonly reload: () => Promise<unknown>;
}

type WithId = ApiParamsContext;

/** The `{id}` of the path, checked before any store is asked (a NUL would be the store's 500). */
function datasetIdParam(ctx: WithId): string {
  const id = ctx.params['id'] ?? '';
  const parsed = v.safeParse(DatasetId, id);
  if (!parsed.success) throw new AppError('validation_failed', `path.id ${parsed.issues[0].message}`, { details: [{ path: 'path.id', message: parsed.issues[0].message }] });
  return id;
}

function notFound(id: string): AppError {
  return new AppError('dataset_not_found', `the dataset ${JSON.stringify(id)} has no definition`);
}

/** `PUT /datasets/:id` (admin): create (201) or replace (200) the definition; the same one again changes nothing. */
export function putDataset(deps: DatasetRouteDeps) {
  return async (ctx: WithId): Promise<void> => {
    const id = ctx.params['id']!;
    let outcome;
    try {
      outcome = await deps.admin.put(id, ctx.state.body);
    } catch (err) {
      if (!(err instanceof DatasetDefinitionError)) throw err;
      throw new AppError('validation_failed', err.message, { details: err.details });
    }
    await deps.reload();
    ctx.state.log?.info({ dataset_id: id, created: outcome.created, updated_at: outcome.definition.updated_at }, 'dataset definition stored');
    ctx.status = outcome.created ? 201 : 200;
    ctx.body = outcome.definition;
  };
}

/** `GET /datasets/:id` (admin): the stored definition. */
export function getDataset(deps: DatasetRouteDeps) {
  return async (ctx: WithId): Promise<void> => {
    const id = datasetIdParam(ctx);
    const definition = await deps.admin.get(id);
    if (definition === undefined) throw notFound(id);
    ctx.body = definition;
  };
}

/** `GET /datasets?limit=&cursor=` (admin): definitions ordered by id. */
export function listDatasets(deps: DatasetRouteDeps) {
  return async (ctx: ApiContext): Promise<void> => {
    const query = parseQuery(DatasetListQuery, ctx.query);
    ctx.body = await deps.admin.list(query);
  };
}

/**
 * `GET /datasets/:id/schema` (any key that may write to the dataset): JSON Schemas of valid
 * write bodies, from the definition this process enforces.
 */
export function getDatasetSchema(deps: DatasetRouteDeps) {
  return (ctx: WithId): void => {
    const id = ctx.params['id']!;
    const key = authenticatedKey(ctx);
    if (!mayWriteDataset(key, id)) throw new AppError('forbidden', `this API key may not write to the dataset ${JSON.stringify(id)}`);
    const dataset = deps.registry.byId(id);
    if (dataset === undefined) throw notFound(id);
    ctx.body = { dataset_id: id, updated_at: dataset.definition.updated_at, ...datasetJsonSchemas(dataset.definition) } satisfies DatasetSchemas;
  };
}
