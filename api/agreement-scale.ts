import type { AgreementLevel, ScaleValue } from '../shared/agreement.js';
import type { DatasetDefinition } from '../shared/dataset-definition.js';
import { AppError } from '../shared/errors.js';
import { invalidInput } from './parse-input.js';

/**
 * What a stored value of the question is on the chosen level, or undefined when it does not fit
 * the scale (not one of the question's options or values any more, a wrong type): such a value
 * is left out, as a missing one, and counted.
 */
type ToScale = (stored: unknown) => ScaleValue | undefined;

/**
 * How to compute a question's agreement. `scalar`: one value per response; without a definition
 * (`defined` false) the values are taken as stored and, when no level was asked for (`level`
 * undefined), decide it: interval when every value is a number, else nominal. `multi_label`: one
 * binary nominal unit per option (chosen or not).
 */
export type AgreementScale =
  | { readonly kind: 'scalar'; readonly defined: boolean; readonly level: AgreementLevel | undefined; readonly toScale: ToScale }
  | { readonly kind: 'multi_label'; readonly level: 'nominal'; readonly options: readonly string[] };

/** The levels each question type allows, its default first. */
const LEVELS_BY_TYPE = {
  label: ['nominal', 'ordinal'],
  rating: ['ordinal', 'nominal', 'interval', 'ratio'],
  number: ['interval', 'nominal', 'ordinal', 'ratio'],
  multi_label: ['nominal'],
} as const satisfies Record<string, readonly AgreementLevel[]>;

/** Why a question type has no agreement here. */
const REFUSED_TYPES: Readonly<Record<string, string>> = {
  text: 'free text has no level of measurement',
  json: 'JSON values have no level of measurement',
  ranking:
    'a ranking orders all its options at once, and none of the four levels compares two orderings (per-option ranks are not independent values); ask for agreement on a label or rating question, or compute a rank correlation from the export',
};

/** A value of the definition's own list: by itself (nominal, interval, ratio) or by its place in the list (ordinal). */
function fromList<T extends string | number>(list: readonly T[], level: AgreementLevel): ToScale {
  const rank = new Map<unknown, number>(list.map((value, i) => [value, i]));
  return (stored) => {
    const at = rank.get(stored);
    if (at === undefined) return undefined;
    return level === 'ordinal' ? at : (stored as T);
  };
}

function finiteNumber(stored: unknown): number | undefined {
  return typeof stored === 'number' && Number.isFinite(stored) ? stored : undefined;
}

/** Without a definition a value is taken as stored when it is a string, a number or a boolean. */
function scalar(stored: unknown): ScaleValue | undefined {
  return typeof stored === 'string' || typeof stored === 'boolean' ? stored : finiteNumber(stored);
}

/**
 * The scale of `question` in `definition` (undefined: the dataset has no definition) on the
 * `requested` level (undefined: the type's default). Throws 404 `question_not_found` for a
 * question the definition does not have, 400 `validation_failed` for a type or level that has no
 * agreement.
 */
export function agreementScale(definition: DatasetDefinition | undefined, questionName: string, requested: AgreementLevel | undefined): AgreementScale {
  if (definition === undefined) return { kind: 'scalar', defined: false, level: requested, toScale: scalar };
  const question = definition.questions.find((q) => q.name === questionName);
  if (question === undefined) {
    throw new AppError('question_not_found', `the dataset ${JSON.stringify(definition.id)} has no question ${JSON.stringify(questionName)} (its questions: ${definition.questions.map((q) => q.name).join(', ')})`);
  }
  const refusal = REFUSED_TYPES[question.type];
  if (refusal !== undefined) throw invalidInput('query.question', `is a ${question.type} question: ${refusal}`);
  const allowed: readonly AgreementLevel[] = LEVELS_BY_TYPE[question.type as keyof typeof LEVELS_BY_TYPE];
  const level = requested ?? allowed[0]!;
  if (!allowed.includes(level)) throw invalidInput('query.level', `must be one of ${allowed.join(', ')} for a ${question.type} question`);
  switch (question.type) {
    case 'multi_label':
      return { kind: 'multi_label', level: 'nominal', options: question.options };
    case 'label':
      return { kind: 'scalar', defined: true, level, toScale: fromList(question.options, level) };
    case 'rating':
      if (level === 'ratio' && question.values.some((x) => x < 0)) throw invalidInput('query.level', 'ratio needs values ≥ 0 (an absolute zero); this rating has negative values');
      return { kind: 'scalar', defined: true, level, toScale: fromList(question.values, level) };
    case 'number': {
      // A value outside the question's bounds now (written before they changed) does not fit.
      const { min = -Infinity, max = Infinity } = question;
      const inBounds: ToScale = (stored) => {
        const x = finiteNumber(stored);
        return x !== undefined && x >= min && x <= max ? x : undefined;
      };
      return { kind: 'scalar', defined: true, level, toScale: inBounds };
    }
    default:
      // The types refused above (REFUSED_TYPES).
      throw invalidInput('query.question', `is a ${question.type} question, which has no agreement`);
  }
}
