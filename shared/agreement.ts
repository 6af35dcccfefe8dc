/*
 * Krippendorff's alpha from its coincidence-matrix definition (K. Krippendorff, "Computing
 * Krippendorff's Alpha-Reliability", 2011): units are added one at a time, so a caller can stream
 * them; the matrix keeps one cell per pair of distinct values that met in a unit, never the units.
 * Pure: no store, no HTTP.
 */

/** Levels of measurement, each with its difference function δ². */
export const AGREEMENT_LEVELS = ['nominal', 'ordinal', 'interval', 'ratio'] as const;
export type AgreementLevel = (typeof AGREEMENT_LEVELS)[number];

/**
 * One observer's value in a unit. Nominal compares values for equality only (`1` and `"1"`
 * differ); the other levels take finite numbers (ordinal: only their order counts, so a rank works
 * as well as the value; ratio: values ≥ 0).
 */
export type ScaleValue = string | number | boolean;

/**
 * Most distinct values one computation holds by default: the expected disagreement sums over
 * every pair of distinct values (25 million pairs at this bound).
 */
export const MAX_DISTINCT_VALUES = 5000;

/** A unit brought a distinct value beyond the matrix's bound. */
export class TooManyValuesError extends Error {
  constructor(readonly max: number) {
    super(`more than ${max} distinct values`);
    this.name = 'TooManyValuesError';
  }
}

export interface CoincidenceMatrix {
  /**
   * Adds one unit: the values its observers gave, one per observer, missing ones left out. A unit
   * with fewer than two values is not pairable and changes nothing. Throws
   * {@link TooManyValuesError} when a new distinct value would exceed the bound.
   */
  addUnit(values: readonly ScaleValue[]): void;
  /** Units with at least two values. */
  readonly pairableUnits: number;
  /** n: the values of the pairable units. */
  readonly pairableValues: number;
  /** o_ck for every pair of values that met in a unit (both orders are held: o_ck = o_kc). */
  coincidences(): ReadonlyMap<ScaleValue, ReadonlyMap<ScaleValue, number>>;
  /** n_c = Σ_k o_ck for every value of a pairable unit. */
  marginals(): ReadonlyMap<ScaleValue, number>;
}

export function createCoincidenceMatrix(options: { maxDistinctValues?: number } = {}): CoincidenceMatrix {
  const max = options.maxDistinctValues ?? MAX_DISTINCT_VALUES;
  const cells = new Map<ScaleValue, Map<ScaleValue, number>>();
  const margins = new Map<ScaleValue, number>();
  let pairableUnits = 0;
  let pairableValues = 0;

  function add(c: ScaleValue, k: ScaleValue, amount: number): void {
    let row = cells.get(c);
    if (row === undefined) cells.set(c, (row = new Map()));
    row.set(k, (row.get(k) ?? 0) + amount);
  }

  return {
    addUnit(values) {
      const m = values.length;
      if (m < 2) return;
      // n_uc: how often each value occurs in the unit.
      const counts = new Map<ScaleValue, number>();
      for (const value of values) counts.set(value, (counts.get(value) ?? 0) + 1);
      let fresh = 0;
      for (const value of counts.keys()) if (!margins.has(value)) fresh++;
      if (margins.size + fresh > max) throw new TooManyValuesError(max);
      // Each of the m(m-1) ordered pairs of values of the unit adds 1/(m_u - 1) to its cell:
      // n_uc·n_uk pairs for c ≠ k, n_uc·(n_uc - 1) for c = k. A unit thus adds m_u to the matrix.
      for (const [c, nc] of counts) {
        for (const [k, nk] of counts) {
          const pairs = c === k ? nc * (nc - 1) : nc * nk;
          if (pairs > 0) add(c, k, pairs / (m - 1));
        }
        margins.set(c, (margins.get(c) ?? 0) + nc);
      }
      pairableUnits++;
      pairableValues += m;
    },
    get pairableUnits() {
      return pairableUnits;
    },
    get pairableValues() {
      return pairableValues;
    },
    coincidences: () => cells,
    marginals: () => margins,
  };
}

type Distance = (c: ScaleValue, k: ScaleValue) => number;

function numeric(value: ScaleValue, level: AgreementLevel): number {
  if (typeof value !== 'number' || !Number.isFinite(value)) throw new TypeError(`the ${level} level takes finite numbers, not ${JSON.stringify(value)}`);
  return value;
}

/** δ²_ck of `level`; ordinal's depends on the marginals n_g of the values between c and k. */
function squaredDifference(level: AgreementLevel, marginals: ReadonlyMap<ScaleValue, number>): Distance {
  switch (level) {
    case 'nominal':
      return (c, k) => (c === k ? 0 : 1);
    case 'interval':
      return (c, k) => (numeric(c, level) - numeric(k, level)) ** 2;
    case 'ratio':
      return (c, k) => {
        const [x, y] = [numeric(c, level), numeric(k, level)];
        if (x < 0 || y < 0) throw new RangeError(`the ratio level takes values ≥ 0, not ${Math.min(x, y)}`);
        return x + y === 0 ? 0 : ((x - y) / (x + y)) ** 2;
      };
    case 'ordinal': {
      // δ²_ck = (Σ_{g=c..k} n_g − (n_c + n_k)/2)²: the values ranked, and below(v) = Σ_{g<v} n_g.
      const ranked = [...marginals.keys()].sort((a, b) => numeric(a, level) - numeric(b, level));
      const below = new Map<ScaleValue, number>();
      let sum = 0;
      for (const value of ranked) {
        below.set(value, sum);
        sum += marginals.get(value)!;
      }
      return (c, k) => {
        const [low, high] = numeric(c, level) <= numeric(k, level) ? [c, k] : [k, c];
        const between = below.get(high)! + marginals.get(high)! - below.get(low)!;
        return (between - (marginals.get(c)! + marginals.get(k)!) / 2) ** 2;
      };
    }
  }
}

/**
 * α = 1 − (n − 1) · Σ_c Σ_k o_ck δ²_ck / Σ_c Σ_k n_c n_k δ²_ck. Null when it is undefined: fewer
 * than two pairable values, or no expected disagreement (every pairable value the same).
 */
export function alphaOf(matrix: CoincidenceMatrix, level: AgreementLevel): number | null {
  const n = matrix.pairableValues;
  if (n < 2) return null;
  const marginals = matrix.marginals();
  const delta = squaredDifference(level, marginals);
  let observed = 0;
  for (const [c, row] of matrix.coincidences()) for (const [k, o] of row) observed += o * delta(c, k);
  let expected = 0;
  for (const [c, nc] of marginals) for (const [k, nk] of marginals) expected += nc * nk * delta(c, k);
  if (expected === 0) return null;
  return 1 - ((n - 1) * observed) / expected;
}

export interface AlphaResult {
  readonly alpha: number | null;
  readonly units: number;
  readonly pairableValues: number;
}

/** Alpha of a reliability data matrix given unit by unit (each unit: its values, missing ones left out). */
export function krippendorffAlpha(units: Iterable<readonly ScaleValue[]>, level: AgreementLevel): AlphaResult {
  const matrix = createCoincidenceMatrix();
  for (const unit of units) matrix.addUnit(unit);
  return { alpha: alphaOf(matrix, level), units: matrix.pairableUnits, pairableValues: matrix.pairableValues };
}
