import * as v from 'valibot';
import { DeadLetterListQuery, type DeadLetterAdmin, type RetryOutcome } from '../shared/dead-letter-admin.js';
import type { DeadLetterReason } from '../shared/dead-letters.js';
import { parseCommandLine, type CliOutput } from './cli.js';

const DEAD_LETTERS_USAGE = `usage: npm run dead-letters -- <command>
  list [--reason R] [--limit N] [--cursor C] [--json]   newest first
  show ID                                               one dead letter with its payload (JSON)
  retry ID | retry --all [--reason R]                   queue the write again, then drop the dead letter
  purge ID | purge --reason R --yes | purge --all --yes delete dead letters (bulk needs --yes)
reasons: malformed_job, malformed_write, store_rejected, record_not_stored, job_failed`;

function retryLine(r: RetryOutcome): string {
  switch (r.outcome) {
    case 'requeued':
      return `${r.id}\trequeued as job ${r.job_id}${r.seq === null ? '' : ` (seq ${r.seq})`}`;
    case 'not_found':
      return `${r.id}\tnot found`;
    case 'not_retryable':
      return `${r.id}\tnot retryable: ${r.error}`;
  }
}

/**
 * `npm run dead-letters -- …` without the process around it (scripts/dead-letters-main.ts), so
 * tests can run it against real servers. Returns the exit code: 0 done, 1 some dead letter not
 * found or not retried, 2 usage (or a bulk purge without --yes).
 */
export async function runDeadLettersCommand(argv: readonly string[], admin: DeadLetterAdmin, io: CliOutput): Promise<number> {
  const parsed = parseCommandLine(argv, {
    reason: { type: 'string' },
    limit: { type: 'string' },
    cursor: { type: 'string' },
    json: { type: 'boolean', default: false },
    all: { type: 'boolean', default: false },
    yes: { type: 'boolean', default: false },
  }, DEAD_LETTERS_USAGE, io);
  if (parsed === undefined) return 2;
  const { command, values, positionals } = parsed;
  const [id] = positionals;
  // The same checks as GET /admin/dead-letters: one schema for both.
  const query = v.safeParse(DeadLetterListQuery, {
    ...(values.reason === undefined ? {} : { reason: values.reason }),
    ...(values.limit === undefined ? {} : { limit: values.limit }),
    ...(values.cursor === undefined ? {} : { cursor: values.cursor }),
  });
  if (!query.success) {
    io.err(`--${v.getDotPath(query.issues[0]) ?? 'option'} ${query.issues[0].message}`);
    return 2;
  }
  const reason: DeadLetterReason | undefined = query.output.reason;

  switch (command) {
    case 'list': {
      if (positionals.length > 0) break;
      const page = await admin.list(query.output);
      if (values.json) {
        io.out(JSON.stringify(page));
        return 0;
      }
      io.out(['id', 'reason', 'failed_at', 'record_id', 'seq', 'error'].join('\t'));
      for (const d of page.items) io.out([d.id, d.reason, d.failed_at, d.record_id ?? '-', d.seq ?? '-', d.error.slice(0, 200)].join('\t'));
      if (page.next_cursor !== null) io.out(`more: --cursor ${page.next_cursor}`);
      return 0;
    }
    case 'show': {
      if (id === undefined || positionals.length > 1) break;
      const letter = await admin.get(id);
      if (letter === undefined) {
        io.err(`error: no dead letter has the id ${JSON.stringify(id)}`);
        return 1;
      }
      io.out(JSON.stringify(letter, null, 2));
      return 0;
    }
    case 'retry': {
      if (values.all === (id !== undefined) || positionals.length > 1) break;
      const outcomes = id === undefined ? await admin.retryAll(reason === undefined ? {} : { reason }) : [await admin.retry(id)];
      for (const r of outcomes) io.out(retryLine(r));
      const requeued = outcomes.filter((r) => r.outcome === 'requeued').length;
      if (id === undefined) io.out(`${requeued} of ${outcomes.length} requeued`);
      return requeued === outcomes.length ? 0 : 1;
    }
    case 'purge': {
      if (id !== undefined) {
        if (positionals.length > 1 || values.all || reason !== undefined) break;
        if (!(await admin.purge(id))) {
          io.err(`error: no dead letter has the id ${JSON.stringify(id)}`);
          return 1;
        }
        io.out(`purged ${id}`);
        return 0;
      }
      if (values.all === (reason !== undefined)) break;
      if (!values.yes) {
        io.err(`refusing to purge ${values.all ? 'every dead letter' : `every ${reason} dead letter`} without --yes`);
        return 2;
      }
      const count = await admin.purgeMany(reason === undefined ? {} : { reason });
      io.out(`purged ${count} dead letter${count === 1 ? '' : 's'}`);
      return 0;
    }
    default:
      break;
  }
  io.err(DEAD_LETTERS_USAGE);
  return 2;
}
