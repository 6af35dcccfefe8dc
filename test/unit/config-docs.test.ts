import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { renderConfigTable, spliceConfigTable } from '../../scripts/config-docs.js';
import { CONFIG_VARIABLES } from '../../shared/config.js';

describe('docs/configuration.md table (scripts/config-docs.ts)', () => {
  const page = readFileSync(new URL('../../docs/configuration.md', import.meta.url), 'utf8');

  it('is the table generated from shared/config.ts (run `npm run docs:config` after changing a setting)', () => {
    expect(spliceConfigTable(page, renderConfigTable())).to.equal(page);
  });

  it('has one row per variable, each with a type, a default or –, and a meaning', () => {
    const rows = renderConfigTable().split('\n').slice(2);
    expect(rows.map((row) => /^\| `([A-Z0-9_]+)` \|/.exec(row)?.[1])).to.deep.equal([...CONFIG_VARIABLES]);
    for (const row of rows) expect(row.split(/(?<!\\)\|/).slice(1, -1).every((c) => c.trim() !== ''), row).to.equal(true);
  });

  it('refuses a page without the markers', () => {
    expect(() => spliceConfigTable('# no table here\n', renderConfigTable())).to.throw(/config-table:start/);
  });
});
