import { expect } from 'chai';
import { measureAgreement } from '../../api/agreement-measure.js';
import { mergeUnits } from '../../api/agreement-units.js';
import { agreementScale } from '../../api/agreement-scale.js';
import type { ResponseUnit } from '../../api/response-units.js';
import { AGREEMENT_LEVELS } from '../../shared/agreement.js';
import { KRIPPENDORFF_2011_C, KRIPPENDORFF_2011_C_ALPHA } from '../helpers/krippendorff-2011.js';
import { shuffled } from '../helpers/writes.js';

/** Units of the rows `rows` of an observers × units matrix; agents when `agent`. Records without a value are left out, as the store's cursor would. */
function unitsOf(matrix: readonly (readonly (number | null)[])[], rows: readonly number[], agent: boolean): ResponseUnit[] {
  const width = Math.max(...matrix.map((row) => row.length));
  const out: ResponseUnit[] = [];
  for (let u = 0; u < width; u++) {
    const values = rows.flatMap((r) => {
      const value = matrix[r]![u];
      if (value === null || value === undefined) return [];
      return [agent ? { userId: `observer-${r}`, value, agent: true as const } : { userId: `observer-${r}`, value }];
    });
    // Zero-padded: the record ids sort as the units do.
    if (values.length > 0) out.push({ recordId: `rec-${String(u).padStart(4, '0')}`, values });
  }
  return out;
}

async function* stream(units: readonly ResponseUnit[]): AsyncGenerator<ResponseUnit, void, undefined> {
  yield* units;
}

async function collect(units: AsyncIterable<ResponseUnit>): Promise<ResponseUnit[]> {
  const out: ResponseUnit[] = [];
  for await (const unit of units) out.push(unit);
  return out;
}

describe('agreement units: agents merged with annotators (api/agreement-units.ts)', () => {
  it("Krippendorff's section C with observers C and D as agents: the same alpha at every level as four annotators, agents counted apart", async () => {
    const humans = unitsOf(KRIPPENDORFF_2011_C, [0, 1], false);
    const agents = unitsOf(KRIPPENDORFF_2011_C, [2, 3], true);
    for (const level of AGREEMENT_LEVELS) {
      const scale = agreementScale(undefined, 'q', level);
      const merged = await measureAgreement('q', scale, mergeUnits(stream(humans), stream(agents)), { agents: true });
      expect(Number(merged.alpha!.toFixed(3)), level).to.equal(KRIPPENDORFF_2011_C_ALPHA[level]);
      expect(merged).to.include({ annotators: 2, agents: 2, units: 11, pairable_values: 40 });
    }
  });

  it('merges two record-sorted streams into one unit per record, whatever records each lacks (seeded random data)', async () => {
    for (let seed = 1; seed <= 50; seed++) {
      let a = seed;
      const rand = () => ((a = (Math.imul(a, 1103515245) + 12345) >>> 0) / 2 ** 32);
      const width = 1 + Math.floor(rand() * 30);
      const observers = 2 + Math.floor(rand() * 4);
      const matrix = Array.from({ length: observers }, () => Array.from({ length: width }, () => (rand() < 0.3 ? null : Math.floor(rand() * 4))));
      const rows = shuffled(Array.from({ length: observers }, (_, i) => i), seed);
      const cut = Math.floor(rand() * (observers + 1));
      const humanRows = rows.slice(0, cut).sort();
      const agentRows = rows.slice(cut).sort();
      const merged = await collect(mergeUnits(stream(unitsOf(matrix, humanRows, false)), stream(unitsOf(matrix, agentRows, true))));
      const all = unitsOf(matrix, [...humanRows, ...agentRows], false);
      expect(merged.map((u) => u.recordId), `seed ${seed}`).to.deep.equal(all.map((u) => u.recordId));
      const norm = (units: ResponseUnit[]) => units.map((u) => u.values.map((x) => `${x.userId}=${String(x.value)}`).sort());
      expect(norm(merged), `seed ${seed}`).to.deep.equal(norm(all));
      const interval = agreementScale(undefined, 'q', 'interval');
      const one = await measureAgreement('q', interval, stream(all));
      const two = await measureAgreement('q', interval, stream(merged), { agents: true });
      expect(two.alpha, `seed ${seed}`).to.equal(one.alpha);
      expect(two.annotators + (two.agents ?? 0), `seed ${seed}`).to.equal(one.annotators);
    }
  });

  it('closes both streams when the consumer stops early', async () => {
    const closed: string[] = [];
    async function* tracked(name: string, units: readonly ResponseUnit[]): AsyncGenerator<ResponseUnit, void, undefined> {
      try {
        yield* units;
      } finally {
        closed.push(name);
      }
    }
    const units = unitsOf(KRIPPENDORFF_2011_C, [0], false);
    const merged = mergeUnits(tracked('a', units), tracked('b', units));
    await merged.next();
    await merged.return(undefined);
    expect(closed.sort()).to.deep.equal(['a', 'b']);
  });
});
