import { expect } from 'chai';
import { measureAgreement } from '../../api/agreement-measure.js';
import { agreementScale } from '../../api/agreement-scale.js';
import type { ResponseUnit } from '../../api/response-units.js';
import { krippendorffAlpha, type AgreementLevel } from '../../shared/agreement.js';
import type { DatasetDefinition } from '../../shared/dataset-definition.js';
import { AppError } from '../../shared/errors.js';
import { KRIPPENDORFF_2011_C, KRIPPENDORFF_2011_C_ALPHA } from '../helpers/krippendorff-2011.js';

const DEFINITION: DatasetDefinition = {
  id: 'ds_agree',
  fields: [{ name: 'prompt', type: 'text', required: true }, { name: 'answer', type: 'text', required: true }],
  questions: [
    { name: 'quality', type: 'rating', values: [1, 2, 3, 4, 5], required: true },
    { name: 'topic', type: 'label', options: ['billing', 'bug', 'other'], required: true },
    { name: 'tags', type: 'multi_label', options: ['rude', 'wrong', 'slow'], required: false },
    { name: 'score', type: 'number', required: false },
    { name: 'order', type: 'ranking', options: ['a', 'b'], required: false },
    { name: 'note', type: 'text', required: false },
    { name: 'raw', type: 'json', required: false },
  ],
  created_at: '2026-01-01T00:00:00.000Z',
  updated_at: '2026-01-01T00:00:00.000Z',
};

/** Units from an observers × units matrix (the paper's layout), as the store would yield them. */
function unitsFrom(matrix: readonly (readonly unknown[])[]): ResponseUnit[] {
  const width = Math.max(...matrix.map((row) => row.length));
  return Array.from({ length: width }, (_, u) => ({
    recordId: `rec-${u}`,
    values: matrix.flatMap((row, observer) => (row[u] === null || row[u] === undefined ? [] : [{ userId: `annotator-${observer}`, value: row[u] }])),
  }));
}

async function* stream(units: readonly ResponseUnit[]): AsyncGenerator<ResponseUnit> {
  yield* units;
}

async function refusal(run: () => Promise<unknown> | unknown): Promise<AppError> {
  try {
    await run();
  } catch (err) {
    expect(err).to.be.instanceOf(AppError);
    return err as AppError;
  }
  throw new Error('expected a refusal');
}

describe('agreement of a question (api/agreement-scale.ts, api/agreement-measure.ts)', () => {
  it("a rating question: Krippendorff's section C at its default level (ordinal) and every level asked for", async () => {
    const units = unitsFrom(KRIPPENDORFF_2011_C);
    const byDefault = await measureAgreement('quality', agreementScale(DEFINITION, 'quality', undefined), stream(units));
    expect(byDefault).to.include({ question: 'quality', level: 'ordinal', units: 11, annotators: 4, pairable_values: 40, excluded_values: 0 });
    expect(byDefault.alpha!.toFixed(3)).to.equal('0.815');
    for (const level of ['nominal', 'ordinal', 'interval', 'ratio'] as const) {
      const answer = await measureAgreement('quality', agreementScale(DEFINITION, 'quality', level), stream(units));
      expect(Number(answer.alpha!.toFixed(3)), level).to.equal(KRIPPENDORFF_2011_C_ALPHA[level]);
    }
  });

  it('a rating ranks by the order of its values list; values outside the definition are left out and counted', async () => {
    // Ranks by list position: [5, 1, 3] puts 1 between 5 and 3, which changes ordinal α.
    const reordered = { ...DEFINITION, questions: [{ name: 'quality', type: 'rating' as const, values: [5, 1, 3], required: true }] };
    const units = unitsFrom([[5, 1, 3, 7], [1, 1, 3, 5], [3, 1, 5, 5]]);
    const answer = await measureAgreement('quality', agreementScale(reordered, 'quality', undefined), stream(units));
    const byRank = krippendorffAlpha([[0, 1, 2], [1, 1, 1], [2, 2, 0], [0, 0]], 'ordinal').alpha;
    expect(answer).to.include({ level: 'ordinal', excluded_values: 1, units: 4, pairable_values: 11 });
    expect(answer.alpha).to.equal(byRank);
    expect(answer.alpha).to.not.equal(krippendorffAlpha([[5, 1, 3], [1, 1, 1], [3, 3, 5], [5, 5]], 'ordinal').alpha);
  });

  it('a label question is nominal by default, ordinal by option order on request, never interval', async () => {
    const units = unitsFrom([['billing', 'bug', 'other', 'bug'], ['billing', 'bug', 'bug', 'bug']]);
    const nominal = await measureAgreement('topic', agreementScale(DEFINITION, 'topic', undefined), stream(units));
    expect(nominal.level).to.equal('nominal');
    expect(nominal.alpha).to.equal(krippendorffAlpha([['billing', 'billing'], ['bug', 'bug'], ['other', 'bug'], ['bug', 'bug']], 'nominal').alpha);
    const ordinal = await measureAgreement('topic', agreementScale(DEFINITION, 'topic', 'ordinal'), stream(units));
    expect(ordinal.alpha).to.equal(krippendorffAlpha([[0, 0], [1, 1], [2, 1], [1, 1]], 'ordinal').alpha);
    const interval = await refusal(() => agreementScale(DEFINITION, 'topic', 'interval'));
    expect(interval.code).to.equal('validation_failed');
    expect(interval.details?.[0]?.path).to.equal('query.level');
  });

  it('multi_label: one binary nominal alpha per option, and the pooled alpha over every (record, option)', async () => {
    const units = unitsFrom([
      [['rude'], ['rude', 'slow'], [], ['wrong']],
      [['rude'], ['slow'], [], ['wrong']],
      [['rude'], ['rude', 'slow'], ['slow'], null],
    ]);
    const answer = await measureAgreement('tags', agreementScale(DEFINITION, 'tags', undefined), stream(units));
    const binary = (option: string) => units.map((u) => u.values.map((x) => (x.value as string[]).includes(option)));
    expect(answer).to.include({ level: 'nominal', units: 4, annotators: 3, pairable_values: 11 });
    expect(answer.options).to.deep.equal(
      ['rude', 'wrong', 'slow'].map((option) => ({ option, alpha: krippendorffAlpha(binary(option), 'nominal').alpha, chosen: binary(option).flat().filter(Boolean).length })),
    );
    expect(answer.alpha).to.equal(krippendorffAlpha(['rude', 'wrong', 'slow'].flatMap(binary), 'nominal').alpha);
  });

  it('ranking, text and json are refused (400); a question the definition lacks is 404 question_not_found', async () => {
    for (const question of ['order', 'note', 'raw']) {
      const err = await refusal(() => agreementScale(DEFINITION, question, undefined));
      expect(err.code, question).to.equal('validation_failed');
      expect(err.details?.[0]?.path).to.equal('query.question');
    }
    expect((await refusal(() => agreementScale(DEFINITION, 'colour', undefined))).code).to.equal('question_not_found');
  });

  it('without a definition the values decide: numbers interval, anything else nominal; lists refused; never answered is 404', async () => {
    const numbers = await measureAgreement('q', agreementScale(undefined, 'q', undefined), stream(unitsFrom(KRIPPENDORFF_2011_C)));
    expect(numbers.level).to.equal('interval');
    expect(numbers.alpha!.toFixed(3)).to.equal('0.849');
    const mixed = await measureAgreement('q', agreementScale(undefined, 'q', undefined), stream(unitsFrom([[1, 'yes'], [1, 'yes']])));
    expect(mixed).to.include({ level: 'nominal', alpha: 1 });
    const ordinalOfText = await refusal(() => measureAgreement('q', agreementScale(undefined, 'q', 'ordinal'), stream(unitsFrom([['a', 'b'], ['a', 'a']]))));
    expect(ordinalOfText.details?.[0]?.path).to.equal('query.level');
    const lists = await refusal(() => measureAgreement('q', agreementScale(undefined, 'q', undefined), stream(unitsFrom([[['a'], ['b']], [['a'], ['a']]]))));
    expect(lists.details?.[0]?.path).to.equal('query.question');
    for (const level of [undefined, 'nominal'] as const) {
      expect((await refusal(() => measureAgreement('q', agreementScale(undefined, 'q', level), stream([])))).code, String(level)).to.equal('question_not_found');
    }
    const listsAtNominal = await refusal(() => measureAgreement('q', agreementScale(undefined, 'q', 'nominal'), stream(unitsFrom([[['a'], ['b']]]))));
    expect(listsAtNominal.details?.[0]?.path).to.equal('query.question');
    // Some lists or objects among numbers: refused too, not measured over the numbers alone.
    const someLists = await refusal(() => measureAgreement('q', agreementScale(undefined, 'q', undefined), stream(unitsFrom([[1, 3, 4], [2, 3, [4]], [[1, 2], { x: 1 }, 4]]))));
    expect(someLists.code).to.equal('validation_failed');
    expect(someLists.details?.[0]?.path).to.equal('query.question');
    // A stored null is no list: left out as before.
    const withNull = await measureAgreement('q', agreementScale(undefined, 'q', undefined), stream([{ recordId: 'r', values: [{ userId: 'a', value: 1 }, { userId: 'b', value: 1 }, { userId: 'c', value: null }] }]));
    expect(withNull).to.include({ level: 'interval', excluded_values: 1 });
  });

  it('multi_label: a stored list with a string that is no option now (an option removed) is left out and counted, not read as choosing nothing', async () => {
    const units = unitsFrom([
      [['rude'], ['slow'], ['rude']],
      [['rude'], ['gone'], ['rude']],
    ]);
    const answer = await measureAgreement('tags', agreementScale(DEFINITION, 'tags', undefined), stream(units));
    // Record 1 keeps one value: not pairable.
    expect(answer).to.include({ units: 2, pairable_values: 4, excluded_values: 1 });
  });

  it('ratio on a rating with negative values is refused; levels a type does not allow are refused', async () => {
    const negative = { ...DEFINITION, questions: [{ name: 'quality', type: 'rating' as const, values: [-1, 0, 1], required: true }] };
    expect((await refusal(() => agreementScale(negative, 'quality', 'ratio'))).details?.[0]?.path).to.equal('query.level');
    for (const level of ['ordinal', 'interval', 'ratio'] as AgreementLevel[]) {
      expect((await refusal(() => agreementScale(DEFINITION, 'tags', level))).details?.[0]?.path, level).to.equal('query.level');
    }
  });
});
