import type { ApiParamsContext } from '../state.js';
import type { DatasetRegistry } from '../dataset-store.js';
import { measureAgreement } from '../agreement-measure.js';
import { agreementScale } from '../agreement-scale.js';
import { parseQuery } from '../parse-input.js';
import { AgreementQuery } from '../read-query.js';
import { fromStore, readableDataset, type ReadRouteDeps } from './reads.js';

interface AgreementRouteDeps extends ReadRouteDeps {
  /** The definitions that give a question its type; absent = no dataset has one (values decide). */
  readonly registry?: DatasetRegistry | undefined;
}

/**
 * `GET /datasets/:dataset_id/agreement?question=`: Krippendorff's alpha of one question over the
 * dataset's submitted responses (units = records, observers = annotators), measured from one
 * cursor as it is read: see api/agreement-measure.ts for what it holds in memory.
 */
export function getAgreement(deps: AgreementRouteDeps) {
  return async (ctx: ApiParamsContext): Promise<void> => {
    const datasetId = readableDataset(ctx);
    const query = parseQuery(AgreementQuery, ctx.query);
    const scale = agreementScale(deps.registry?.byId(datasetId)?.definition, query.question, query.level);
    const units = deps.reader.submittedUnits({
      datasetId,
      question: query.question,
      annotators: query.annotators,
      agents: query.include_agents,
      completedOnly: query.records === 'completed',
    });
    // Filters that leave no value say nothing of whether the question exists: asked apart.
    const answered = () => deps.reader.questionAnswered(datasetId, query.question);
    ctx.set('Cache-Control', 'no-store');
    ctx.body = await fromStore(deps, () => measureAgreement(query.question, scale, units, { agents: query.include_agents !== undefined, answered }), 'whole pass');
  };
}
