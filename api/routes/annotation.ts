import type { ApiParamsContext } from '../state.js';
import type { AnnotationReader } from '../annotation-reads.js';
import type { DatasetRegistry } from '../dataset-store.js';
import { parseQuery } from '../parse-input.js';
import { NoParameters } from '../read-query.js';
import { checkRecordDataset, fromStore, readableDataset, readableRecordId, recordPending, type ReadRouteDeps } from './reads.js';


interface AnnotationRouteDeps extends ReadRouteDeps {
  readonly annotation: AnnotationReader;
  /** The definitions that give a dataset its completion rule; absent = no dataset has one. */
  readonly registry?: DatasetRegistry | undefined;
}

/** `GET /feedback-record/:id/history`: each response of the record with its versions, oldest first; scopes as the record read. */
export function getRecordHistory(deps: AnnotationRouteDeps) {
  return async (ctx: ApiParamsContext): Promise<void> => {
    const id = readableRecordId(deps, ctx);
    parseQuery(NoParameters, ctx.query);
    const history = await fromStore(deps, () => deps.annotation.history(id));
    if (history === undefined) throw recordPending(deps);
    checkRecordDataset(ctx, history.feedback_dataset_id);
    ctx.set('Cache-Control', 'no-store');
    ctx.body = history;
  };
}

/** `GET /datasets/:dataset_id/progress`: records by completion status, responses by status, per annotator. */
export function getDatasetProgress(deps: AnnotationRouteDeps) {
  return async (ctx: ApiParamsContext): Promise<void> => {
    const datasetId = readableDataset(ctx);
    // No parameters (the export's filters are not progress filters).
    parseQuery(NoParameters, ctx.query);
    const rule = deps.registry?.byId(datasetId)?.definition.completion;
    ctx.set('Cache-Control', 'no-store');
    ctx.body = await fromStore(deps, () => deps.annotation.progress(datasetId, rule), 'whole pass');
  };
}
