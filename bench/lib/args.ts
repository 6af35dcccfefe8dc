// Command-line options of the standalone bench scripts (bench/run.ts has its own parser, bench/lib/options.ts).

/** The whole number after `name` in `argv` (at least `min`), or `def` when `name` is absent; anything else throws. */
export function wholeNumberArg(argv: readonly string[], name: string, def: number, min = 1): number {
  const i = argv.indexOf(name);
  if (i < 0) return def;
  const n = Number(argv[i + 1]);
  if (!Number.isInteger(n) || n < min) throw new Error(`${name} needs a whole number of at least ${min}`);
  return n;
}
