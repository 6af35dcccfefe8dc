// `npm run docs:config`: rewrites README.md's configuration table from shared/config.ts.
import { readFileSync, writeFileSync } from 'node:fs';
import { renderConfigTable, spliceConfigTable } from './config-docs.js';

const path = new URL('../README.md', import.meta.url);
const before = readFileSync(path, 'utf8');
const after = spliceConfigTable(before, renderConfigTable());
writeFileSync(path, after);
process.stdout.write(after === before ? 'README.md: configuration table already up to date\n' : 'README.md: configuration table rewritten\n');
