import { expect } from 'chai';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { ErrorCode } from '../../shared/errors.js';

const API_PAGE = fileURLToPath(new URL('../../docs/api.md', import.meta.url));

/** The rows of the page's Markdown tables that name an error code as `code`. */
function tableRowsNaming(page: string, code: string): string[] {
  return page
    .split('\n')
    .filter((line) => line.trimStart().startsWith('|'))
    .filter((line) => line.includes(`\`${code}\``));
}

describe('error codes are documented (docs/api.md)', () => {
  let page = '';
  before(() => {
    expect(existsSync(API_PAGE), `${API_PAGE} must exist and hold the error table`).to.equal(true);
    page = readFileSync(API_PAGE, 'utf8');
  });

  for (const code of Object.keys(ErrorCode) as (keyof typeof ErrorCode)[]) {
    it(`\`${code}\` is in the error table of docs/api.md with its status ${ErrorCode[code].status}`, () => {
      const rows = tableRowsNaming(page, code);
      expect(rows.length, `no table row of docs/api.md names \`${code}\``).to.be.greaterThan(0);
      const status = String(ErrorCode[code].status);
      expect(rows.some((row) => new RegExp(`(^|\\D)${status}(\\D|$)`).test(row)), `the row naming \`${code}\` does not give its status ${status}:\n${rows.join('\n')}`).to.equal(true);
    });
  }

});
