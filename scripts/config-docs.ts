import { CONFIG_SETTINGS } from '../shared/config.js';
import type { Setting } from '../shared/settings.js';

/** The configuration table of docs/configuration.md sits between these two lines. */
const TABLE_START = '<!-- config-table:start (npm run docs:config writes this table from shared/config.ts) -->';
const TABLE_END = '<!-- config-table:end -->';

/** A Markdown table of the settings: one row each, in declaration order. */
export function renderConfigTable(settings: readonly Setting[] = CONFIG_SETTINGS): string {
  const cell = (text: string | undefined) => (text === undefined ? '–' : text.replace(/\|/g, '\\|'));
  const defaultOf = (s: Setting) => (s.default === undefined ? '–' : `\`${s.default}\`${s.defaultReadable === undefined ? '' : ` (${s.defaultReadable})`}`);
  return [
    '| Variable | Type | Unit | Default | Meaning |',
    '|---|---|---|---|---|',
    // `type` may carry its own escaped pipes (a list of choices): it is written as Markdown already.
    ...settings.map((s) => `| \`${s.env}\` | ${s.type} | ${cell(s.unit)} | ${defaultOf(s)} | ${cell(s.doc)} |`),
  ].join('\n');
}

/** `page` with the text between the markers replaced by `table`; throws when a marker is missing. */
export function spliceConfigTable(page: string, table: string): string {
  const start = page.indexOf(TABLE_START);
  const end = page.indexOf(TABLE_END);
  if (start < 0 || end < start) throw new Error(`docs/configuration.md lacks the lines ${TABLE_START} and ${TABLE_END}`);
  return `${page.slice(0, start + TABLE_START.length)}\n${table}\n${page.slice(end)}`;
}
