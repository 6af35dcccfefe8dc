// `npm run docs:config`: rewrites the configuration table of docs/configuration.md from shared/config.ts.
import { readFileSync, writeFileSync } from 'node:fs';
import { renderConfigTable, spliceConfigTable } from './config-docs.js';

const path = new URL('../docs/configuration.md', import.meta.url);
const before = readFileSync(path, 'utf8');
const after = spliceConfigTable(before, renderConfigTable());
writeFileSync(path, after);
process.stdout.write(after === before ? 'docs/configuration.md: configuration table already up to date\n' : 'docs/configuration.md: configuration table rewritten\n');
