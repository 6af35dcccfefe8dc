import { expect } from 'chai';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { ErrorCode } from '../../shared/errors.js';

const README = fileURLToPath(new URL('../../README.md', import.meta.url));

/** The rows of README.md's Markdown tables that name an error code as `code`. */
function tableRowsNaming(readme: string, code: string): string[] {
  return readme
    .split('\n')
    .filter((line) => line.trimStart().startsWith('|'))
    .filter((line) => line.includes(`\`${code}\``));
}

describe('error codes are documented (README.md)', () => {
  let readme = '';
  before(() => {
    expect(existsSync(README), `${README} must exist and hold the error table`).to.equal(true);
    readme = readFileSync(README, 'utf8');
  });

  for (const code of Object.keys(ErrorCode) as (keyof typeof ErrorCode)[]) {
    it(`\`${code}\` is in the README's error table with its status ${ErrorCode[code].status}`, () => {
      const rows = tableRowsNaming(readme, code);
      expect(rows.length, `no table row of README.md names \`${code}\``).to.be.greaterThan(0);
      const status = String(ErrorCode[code].status);
      expect(rows.some((row) => new RegExp(`(^|\\D)${status}(\\D|$)`).test(row)), `the row naming \`${code}\` does not give its status ${status}:\n${rows.join('\n')}`).to.equal(true);
    });
  }

});
