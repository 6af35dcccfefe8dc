import { expect } from 'chai';
import fc from 'fast-check';
import { AGREEMENT_LEVELS, alphaOf, createCoincidenceMatrix, krippendorffAlpha, TooManyValuesError, type AgreementLevel, type ScaleValue } from '../../shared/agreement.js';
import { KRIPPENDORFF_2011_C, KRIPPENDORFF_2011_C_ALPHA } from '../helpers/krippendorff-2011.js';

/** Section A of the same paper: 2 observers, 10 units, binary, no missing value; nominal α = .095. */
const KRIPPENDORFF_2011_A = [
  [0, 1, 0, 0, 0, 0, 0, 0, 1, 0],
  [1, 1, 1, 0, 0, 1, 0, 0, 0, 0],
];

/** Observers × units (the paper's layout) → the values of each unit, missing ones left out. */
function unitsOf(matrix: readonly (readonly (ScaleValue | null)[])[]): ScaleValue[][] {
  const width = Math.max(...matrix.map((row) => row.length));
  return Array.from({ length: width }, (_, u) => matrix.map((row) => row[u]).filter((x): x is ScaleValue => x !== null && x !== undefined));
}

/**
 * A second implementation, written from the pairwise form instead of the coincidence matrix:
 * D_o = 1/n Σ_u 1/(m_u − 1) Σ_{i≠j in u} δ²(v_i, v_j), D_e = 1/(n(n − 1)) Σ_{i≠j among all
 * pairable values} δ²(v_i, v_j), α = 1 − D_o/D_e. The ordinal δ² counts the pairable values
 * between c and k directly. O(n²) per α: for small data only.
 */
function pairwiseAlpha(units: readonly (readonly ScaleValue[])[], level: AgreementLevel): number | null {
  const pairable = units.filter((u) => u.length >= 2);
  const all = pairable.flat();
  const n = all.length;
  if (n < 2) return null;
  const count = (x: ScaleValue) => all.filter((g) => g === x).length;
  const delta = (c: ScaleValue, k: ScaleValue): number => {
    if (level === 'nominal') return c === k ? 0 : 1;
    const [x, y] = [c as number, k as number];
    if (level === 'interval') return (x - y) * (x - y);
    if (level === 'ratio') return x === y ? 0 : ((x - y) / (x + y)) ** 2;
    const between = all.filter((g) => (g as number) >= Math.min(x, y) && (g as number) <= Math.max(x, y)).length;
    return (between - (count(c) + count(k)) / 2) ** 2;
  };
  let observed = 0;
  for (const unit of pairable) {
    let sum = 0;
    for (let i = 0; i < unit.length; i++) for (let j = 0; j < unit.length; j++) if (i !== j) sum += delta(unit[i]!, unit[j]!);
    observed += sum / (unit.length - 1);
  }
  let expected = 0;
  for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) if (i !== j) expected += delta(all[i]!, all[j]!);
  if (expected === 0) return null;
  return 1 - (observed / n) / (expected / (n * (n - 1)));
}

describe("Krippendorff's alpha (shared/agreement.ts)", () => {
  describe("Krippendorff's worked examples (2011)", () => {
    for (const level of AGREEMENT_LEVELS) {
      it(`section C, 4 observers × 12 units with missing values: ${level} α = ${KRIPPENDORFF_2011_C_ALPHA[level]}`, () => {
        const result = krippendorffAlpha(unitsOf(KRIPPENDORFF_2011_C), level);
        expect(result.alpha).to.be.a('number');
        expect(Number(result.alpha!.toFixed(3))).to.equal(KRIPPENDORFF_2011_C_ALPHA[level]);
        // Unit 12 has one value: 11 pairable units holding 40 values (the paper's n).
        expect(result.units).to.equal(11);
        expect(result.pairableValues).to.equal(40);
      });
    }

    it('section C: the coincidence matrix is the published one (n_1 = 9, n_2 = 13, n_3 = 10, n_4 = 5, n_5 = 3; o_11 = 7, o_12 = 4/3, o_23 = 4/3 …)', () => {
      const matrix = createCoincidenceMatrix();
      for (const unit of unitsOf(KRIPPENDORFF_2011_C)) matrix.addUnit(unit);
      expect(Object.fromEntries(matrix.marginals())).to.deep.equal({ 1: 9, 2: 13, 3: 10, 4: 5, 5: 3 });
      const o = (c: number, k: number) => matrix.coincidences().get(c)?.get(k) ?? 0;
      expect(o(1, 1)).to.be.closeTo(7, 1e-12);
      expect(o(1, 2)).to.be.closeTo(4 / 3, 1e-12);
      expect(o(1, 3)).to.be.closeTo(1 / 3, 1e-12);
      expect(o(1, 4)).to.be.closeTo(1 / 3, 1e-12);
      expect(o(2, 2)).to.be.closeTo(10, 1e-12);
      expect(o(2, 3)).to.be.closeTo(4 / 3, 1e-12);
      expect(o(2, 4)).to.be.closeTo(1 / 3, 1e-12);
      expect(o(3, 3)).to.be.closeTo(8, 1e-12);
      expect(o(3, 4)).to.be.closeTo(1 / 3, 1e-12);
      expect(o(4, 4)).to.be.closeTo(4, 1e-12);
      expect(o(5, 5)).to.be.closeTo(3, 1e-12);
      expect(o(1, 5)).to.equal(0);
      expect(o(2, 1)).to.equal(o(1, 2));
    });

    it('section A, 2 observers × 10 binary units: nominal α = 0.095', () => {
      expect(krippendorffAlpha(unitsOf(KRIPPENDORFF_2011_A), 'nominal').alpha!.toFixed(3)).to.equal('0.095');
    });
  });

  describe('edge cases', () => {
    it('perfect agreement is 1 at every level; no variation at all is null (undefined), as is no pairable unit', () => {
      for (const level of AGREEMENT_LEVELS) {
        expect(krippendorffAlpha([[1, 1], [2, 2, 2], [3]], level).alpha, level).to.equal(1);
        expect(krippendorffAlpha([[2, 2], [2, 2]], level).alpha, level).to.equal(null);
        expect(krippendorffAlpha([[1], [2], []], level)).to.deep.equal({ alpha: null, units: 0, pairableValues: 0 });
      }
    });

    it('nominal tells 1 from "1"; the numeric levels refuse what is not a finite number, ratio a negative value', () => {
      expect(krippendorffAlpha([[1, '1'], [2, 2]], 'nominal').alpha).to.be.below(1);
      expect(() => krippendorffAlpha([['a', 'b'], ['a', 'a']], 'interval')).to.throw(TypeError);
      expect(() => krippendorffAlpha([[-1, 2], [2, 2]], 'ratio')).to.throw(RangeError);
    });

    it('refuses a distinct value beyond its bound, before changing the matrix', () => {
      const matrix = createCoincidenceMatrix({ maxDistinctValues: 3 });
      matrix.addUnit([1, 2]);
      expect(() => matrix.addUnit([3, 4])).to.throw(TooManyValuesError);
      matrix.addUnit([3, 1]);
      expect(matrix.pairableUnits).to.equal(2);
      expect(alphaOf(matrix, 'nominal')).to.be.a('number');
    });
  });

  describe('against the pairwise form on random data (property)', () => {
    const value = fc.integer({ min: 0, max: 6 });
    /** Units of 0-7 values (an observer's missing value is simply absent); some units unpairable. */
    const data = (v: fc.Arbitrary<ScaleValue>) => fc.array(fc.array(v, { maxLength: 7 }), { maxLength: 20 });
    const close = (a: number | null, b: number | null) => (a === null || b === null ? a === b : Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(b)));

    for (const level of AGREEMENT_LEVELS) {
      it(`${level}: the coincidence matrix and the pairwise form agree`, () => {
        fc.assert(
          fc.property(data(value), (units) => {
            const mine = krippendorffAlpha(units, level).alpha;
            const theirs = pairwiseAlpha(units, level);
            return close(mine, theirs);
          }),
          { numRuns: 400 },
        );
      });
    }

    it('nominal on mixed strings, numbers and booleans: both agree', () => {
      fc.assert(fc.property(data(fc.constantFrom<ScaleValue>('a', 'b', 'c', 1, '1', true)), (units) => close(krippendorffAlpha(units, 'nominal').alpha, pairwiseAlpha(units, 'nominal'))), { numRuns: 400 });
    });

    it('the order of the units and of the values within a unit does not change α', () => {
      fc.assert(
        fc.property(data(value), fc.constantFrom(...AGREEMENT_LEVELS), (units, level) => {
          const reversed = [...units].reverse().map((u) => [...u].reverse());
          return close(krippendorffAlpha(reversed, level).alpha, krippendorffAlpha(units, level).alpha);
        }),
        { numRuns: 200 },
      );
    });
  });
});
