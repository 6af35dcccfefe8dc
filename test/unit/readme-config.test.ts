import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { CONFIG_VARIABLES } from '../../shared/config.js';

describe('README configuration table', () => {
  const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
  const rows = new Set(readme.split('\n').filter((l) => l.startsWith('| `')).map((l) => /^\| `([A-Z0-9_]+)`/.exec(l)?.[1]));
  for (const name of CONFIG_VARIABLES) {
    it(`documents ${name}`, () => {
      expect(rows.has(name), `${name} has no row in README.md's configuration table`).to.equal(true);
    });
  }
});
