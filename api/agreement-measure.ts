import { alphaOf, createCoincidenceMatrix, TooManyValuesError, type AgreementLevel, type CoincidenceMatrix, type ScaleValue } from '../shared/agreement.js';
import type { AgreementBody } from '../shared/answers.js';
import { AppError } from '../shared/errors.js';
import { invalidInput } from './parse-input.js';
import type { AgreementScale } from './agreement-scale.js';
import type { ResponseUnit, UnitValue } from './response-units.js';

/** What the units brought besides the coincidences: counts and who. */
interface Tally {
  units: number;
  pairableValues: number;
  excluded: number;
  /** Values present in the store for the question, fitting or not. */
  seen: number;
  readonly annotators: Set<string>;
  readonly agents: Set<string>;
}

/** The values of a unit that fit the scale, and their annotators; counts the rest. */
function fitting<T>(unit: ResponseUnit, tally: Tally, toScale: (stored: unknown) => T | undefined): { values: T[]; users: UnitValue[] } {
  const values: T[] = [];
  const users: UnitValue[] = [];
  for (const observer of unit.values) {
    tally.seen++;
    const fit = toScale(observer.value);
    if (fit === undefined) tally.excluded++;
    else {
      values.push(fit);
      users.push(observer);
    }
  }
  return { values, users };
}

function pairable(tally: Tally, users: readonly UnitValue[]): boolean {
  if (users.length < 2) return false;
  tally.units++;
  tally.pairableValues += users.length;
  for (const user of users) (user.agent === true ? tally.agents : tally.annotators).add(user.userId);
  return true;
}

/** α of `matrix`, with the module's refusals (a non-number at a numeric level, a negative ratio value) as 400s. */
function alphaAt(matrix: CoincidenceMatrix, level: AgreementLevel): number | null {
  try {
    return alphaOf(matrix, level);
  } catch (err) {
    if (err instanceof TypeError || err instanceof RangeError) throw invalidInput('query.level', `cannot be ${level} for these values: ${err.message}`);
    throw err;
  }
}

/**
 * A stored `multi_label` value as the set it chose, when it fits the question's options now: a
 * list with a string that is no option (one removed since, or never one) is left out and counted
 * in `excluded_values`, like any value outside a question's scale, not read as choosing nothing.
 */
function optionList(options: readonly string[]): (stored: unknown) => ReadonlySet<string> | undefined {
  const known = new Set(options);
  return (stored) => (Array.isArray(stored) && stored.every((x) => typeof x === 'string' && known.has(x)) ? new Set(stored as string[]) : undefined);
}

interface MeasureOptions {
  /** Agents' suggestions are among the units' observers: the answer counts them apart. */
  readonly agents?: boolean;
  /**
   * Whether any submitted response of the dataset answers the question, whatever filters made
   * `units` (records, annotators): asked only for a dataset without a definition whose units
   * hold no value of it, to tell a question nobody answers (404) from filters that leave nothing
   * (200, `units: 0`). Absent: the emptiness of `units` is the answer.
   */
  readonly answered?: () => Promise<boolean>;
}

/**
 * Krippendorff's alpha of `question` over `units` (one record's submitted responses each, in any
 * order), accumulated unit by unit: memory holds the coincidence matrix (distinct values, and
 * pairs of them that met), the annotators (and agents, with `options.agents`) counted and one
 * unit, never the dataset.
 */
export async function measureAgreement(question: string, scale: AgreementScale, units: AsyncIterable<ResponseUnit>, options: MeasureOptions = {}): Promise<AgreementBody> {
  const tally: Tally = { units: 0, pairableValues: 0, excluded: 0, seen: 0, annotators: new Set(), agents: new Set() };
  const counts = () => ({
    units: tally.units,
    annotators: tally.annotators.size,
    ...(options.agents === true ? { agents: tally.agents.size } : {}),
    pairable_values: tally.pairableValues,
    excluded_values: tally.excluded,
  });
  try {
    if (scale.kind === 'multi_label') {
      const pooled = createCoincidenceMatrix();
      const byOption = new Map(scale.options.map((option) => [option, createCoincidenceMatrix()]));
      const fits = optionList(scale.options);
      for await (const unit of units) {
        const { values, users } = fitting(unit, tally, fits);
        if (!pairable(tally, users)) continue;
        for (const [option, matrix] of byOption) {
          const chosen = values.map((set) => set.has(option));
          matrix.addUnit(chosen);
          pooled.addUnit(chosen);
        }
      }
      return {
        question,
        level: 'nominal',
        alpha: alphaAt(pooled, 'nominal'),
        ...counts(),
        options: [...byOption].map(([option, matrix]) => ({ option, alpha: alphaAt(matrix, 'nominal'), chosen: matrix.marginals().get(true) ?? 0 })),
      };
    }
    const matrix = createCoincidenceMatrix();
    // Without a definition the level follows the values (interval when every one is a number):
    // all of them, paired or not, so that a question nobody answered twice keeps its type.
    let numbersOnly = true;
    let anyValue = false;
    /** A list or an object among the values of a question without a definition. */
    let structured = false;
    const toScale = scale.defined
      ? scale.toScale
      : (stored: unknown) => {
          if (stored !== null && typeof stored === 'object') structured = true;
          return scale.toScale(stored);
        };
    for await (const unit of units) {
      const { values, users } = fitting<ScaleValue>(unit, tally, toScale);
      for (const x of values) {
        anyValue = true;
        if (typeof x !== 'number') numbersOnly = false;
      }
      if (pairable(tally, users)) matrix.addUnit(values);
    }
    if (!scale.defined && tally.seen === 0 && !(await (options.answered?.() ?? false))) {
      throw new AppError('question_not_found', `no submitted response of this dataset answers ${JSON.stringify(question)} (the dataset has no definition, so only its answers show which questions exist)`);
    }
    // Any list or object among them: the question is not one of single values, and alpha over
    // the others alone would be a measure of part of its answers.
    if (structured) {
      throw invalidInput('query.question', `has values that are not strings, numbers or booleans (lists or objects): agreement on them needs a dataset definition that gives ${JSON.stringify(question)} a type (multi_label for lists)`);
    }
    const level = scale.level ?? (anyValue && numbersOnly ? 'interval' : 'nominal');
    return { question, level, alpha: alphaAt(matrix, level), ...counts() };
  } catch (err) {
    if (err instanceof TooManyValuesError) {
      throw invalidInput('query.question', `has ${err.message} among its pairable values; alpha sums over every pair of distinct values, so this question is not measured (round its values, or compute it from the export)`);
    }
    throw err;
  }
}
