import { readFile } from 'node:fs/promises';
import * as v from 'valibot';
import { DatasetDefinitionError, DatasetListQuery, type DatasetAdmin } from '../shared/dataset-admin.js';
import { parseCommandLine, type CliOutput } from './cli.js';

const DATASETS_USAGE = `usage: npm run datasets -- <command>
  apply FILE.json    create or replace the definition in FILE (its "id" names the dataset);
                     API processes apply it within DATASETS_REFRESH_MS; stored data is not rewritten
  list [--json]      defined datasets, by id
  show ID            one definition, as JSON`;

/** Reads the definitions page by page: the CLI lists every one. */
async function allDefinitions(admin: DatasetAdmin) {
  const out = [];
  let cursor: string | null = null;
  do {
    const page = await admin.list(v.parse(DatasetListQuery, { limit: '500', ...(cursor === null ? {} : { cursor }) }));
    out.push(...page.items);
    cursor = page.next_cursor;
  } while (cursor !== null);
  return out;
}

/**
 * `npm run datasets -- …` without the process around it (scripts/datasets-main.ts opens MongoDB
 * and calls this), so tests can run it against a real database. Returns the exit code: 0 done,
 * 1 refused (bad definition, unreadable file, no such dataset), 2 usage.
 */
export async function runDatasetsCommand(argv: readonly string[], admin: DatasetAdmin, io: CliOutput): Promise<number> {
  const parsed = parseCommandLine(argv, { json: { type: 'boolean', default: false } }, DATASETS_USAGE, io);
  if (parsed === undefined) return 2;
  const { command, values, positionals } = parsed;
  switch (command) {
    case 'apply': {
      const [file] = positionals;
      if (file === undefined || positionals.length > 1) break;
      let input: unknown;
      try {
        input = JSON.parse(await readFile(file, 'utf8')) as unknown;
      } catch (err) {
        io.err(`error: cannot read ${file} as JSON: ${(err as Error).message}`);
        return 1;
      }
      const id = typeof input === 'object' && input !== null && !Array.isArray(input) ? (input as Record<string, unknown>)['id'] : undefined;
      if (typeof id !== 'string') {
        io.err(`error: ${file} must be a JSON object whose "id" names the dataset`);
        return 1;
      }
      try {
        const { definition, created } = await admin.put(id, input);
        io.out(`${created ? 'created' : 'applied'} dataset "${id}": ${definition.fields.length} fields, ${definition.questions.length} questions, updated_at ${definition.updated_at}`);
        io.out('API processes check writes against it within DATASETS_REFRESH_MS; data stored before is not rewritten.');
        return 0;
      } catch (err) {
        if (!(err instanceof DatasetDefinitionError)) throw err;
        io.err(`error: ${file} is not a valid dataset definition:`);
        for (const d of err.details) io.err(`  ${d.path}: ${d.message}`);
        return 1;
      }
    }
    case 'list': {
      if (positionals.length > 0) break;
      const definitions = await allDefinitions(admin);
      if (values.json) {
        io.out(JSON.stringify(definitions));
        return 0;
      }
      io.out(['id', 'fields', 'questions', 'updated_at', 'title'].join('\t'));
      for (const d of definitions) io.out([d.id, d.fields.length, d.questions.length, d.updated_at, d.title ?? ''].join('\t'));
      return 0;
    }
    case 'show': {
      const [id] = positionals;
      if (id === undefined || positionals.length > 1) break;
      const definition = await admin.get(id);
      if (definition === undefined) {
        io.err(`error: the dataset "${id}" has no definition`);
        return 1;
      }
      io.out(JSON.stringify(definition, null, 2));
      return 0;
    }
    default:
      break;
  }
  io.err(DATASETS_USAGE);
  return 2;
}
