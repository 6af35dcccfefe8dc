import { parseArgs, type ParseArgsConfig } from 'node:util';

type OptionsConfig = NonNullable<ParseArgsConfig['options']>;

/** Where a command writes: `out` for results, `err` for problems (stdout and stderr in the CLI). */
export interface CliOutput {
  out(line: string): void;
  err(line: string): void;
}

/**
 * `<command> [options] [positionals]` read with `node:util`'s parseArgs; on a parse error the
 * error and `usage` go to `io.err` and the result is undefined (exit code 2).
 */
export function parseCommandLine<const O extends OptionsConfig>(argv: readonly string[], options: O, usage: string, io: CliOutput) {
  const [command, ...args] = argv;
  try {
    return { command, ...parseArgs({ args, allowPositionals: true, options }) };
  } catch (err) {
    io.err(`${(err as Error).message}\n${usage}`);
    return undefined;
  }
}

/**
 * The process around a command: results on stdout, problems on stderr, the command's exit code,
 * 1 (with one `error:` line) when it throws; `close` runs in every case.
 */
export async function runCliProcess(command: (io: CliOutput) => Promise<number>, close: () => Promise<void>): Promise<void> {
  try {
    process.exitCode = await command({
      out: (line) => process.stdout.write(`${line}\n`),
      err: (line) => process.stderr.write(`${line}\n`),
    });
  } catch (err) {
    process.stderr.write(`error: ${(err as Error).message}\n`);
    process.exitCode = 1;
  } finally {
    await close();
  }
}
