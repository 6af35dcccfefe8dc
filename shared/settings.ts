import * as v from 'valibot';

/*
 * How one setting is declared: an environment variable with its schema (type, default, bounds,
 * unit) and the docs/configuration.md line generated from it. shared/config.ts declares every setting with these.
 */

/**
 * One environment variable: its schema (type, default, bounds) and what docs/configuration.md says of it.
 * The schema's messages start with the variable's name; `loadConfig` (shared/config.ts) turns them
 * into a `ConfigError`.
 */
export interface Setting<TOutput = unknown> {
  readonly env: string;
  readonly schema: v.GenericSchema<string | undefined, TOutput>;
  /** The type as a reader sees it, with its bounds: `whole number, 1–4,000`. */
  readonly type: string;
  /** `ms`, `s`, `bytes`, …; undefined when the value has no unit. */
  readonly unit: string | undefined;
  /** The default as written in the environment; undefined when unset by default. */
  readonly default: string | undefined;
  /** The default for a reader when it differs from the raw value: `1 MiB` for `1048576`. */
  readonly defaultReadable?: string;
  /** One line for docs/configuration.md (Markdown, links relative to docs/); may say what an unset variable means. */
  readonly doc: string;
}

export type Unit = 'ms' | 's' | 'bytes' | 'jobs' | 'writes' | 'items' | 'attempts' | 'stalls' | 'requests/min' | 'processes' | 'shards' | 'replicas' | 'versions';

export const MiB = 1024 * 1024;

/** `1048576` as `1 MiB`, `30000` as `30,000`: for docs/configuration.md only. */
function readable(value: number, unit: Unit | undefined): string {
  if (unit === 'bytes') {
    for (const [size, name] of [[1024 * MiB, 'GiB'], [MiB, 'MiB'], [1024, 'KiB']] as const) {
      if (value >= size && value % size === 0) return `${value / size} ${name}`;
    }
  }
  return value.toLocaleString('en-US');
}

export function int(env: string, o: { default: number; min: number; max: number; unit?: Unit }, doc: string): Setting<number> {
  return {
    env,
    schema: v.pipe(
      v.optional(v.string(), String(o.default)),
      v.regex(/^\d+$/, `${env} must be a whole number`),
      v.transform(Number),
      v.minValue(o.min, `${env} must be at least ${o.min}`),
      v.maxValue(o.max, `${env} must be at most ${o.max}`),
    ),
    type: `whole number, ${readable(o.min, o.unit)}–${readable(o.max, o.unit)}`,
    unit: o.unit,
    default: String(o.default),
    ...(o.unit === 'bytes' && o.default >= 1024 ? { defaultReadable: readable(o.default, o.unit) } : {}),
    doc,
  };
}

/** A whole number without a default: unset stays undefined. */
export function optionalInt(env: string, o: { min: number; max: number }, doc: string): Setting<number | undefined> {
  return {
    env,
    schema: v.optional(
      v.pipe(
        v.string(),
        v.regex(/^\d+$/, `${env} must be a whole number`),
        v.transform(Number),
        v.minValue(o.min, `${env} must be at least ${o.min}`),
        v.maxValue(o.max, `${env} must be at most ${o.max}`),
      ),
    ),
    type: `whole number, ${readable(o.min, undefined)}–${readable(o.max, undefined)}`,
    unit: undefined,
    default: undefined,
    doc,
  };
}

export function bool(env: string, def: boolean, doc: string): Setting<boolean> {
  return {
    env,
    schema: v.pipe(
      v.optional(v.string(), String(def)),
      v.picklist(['true', 'false', '1', '0'], `${env} must be true or false`),
      v.transform((s) => s === 'true' || s === '1'),
    ),
    type: '`true` or `false` (`1`, `0`)',
    unit: undefined,
    default: String(def),
    doc,
  };
}

export function oneOf<const T extends readonly [string, ...string[]]>(env: string, values: T, def: T[number], doc: string): Setting<T[number]> {
  return {
    env,
    schema: v.optional(v.picklist(values, `${env} must be one of ${values.join(', ')}`), def),
    type: values.map((s) => `\`${s}\``).join(' \\| '),
    unit: undefined,
    default: def,
    doc,
  };
}

/** A URL of one of `schemes`; without a default, unset stays undefined. */
export function url<D extends string | undefined>(env: string, def: D, schemes: readonly string[], doc: string): Setting<D extends string ? string : string | undefined> {
  const checked = v.pipe(
    v.string(),
    v.check((s) => {
      try {
        return schemes.includes(new URL(s).protocol);
      } catch {
        return false;
      }
    }, `${env} must be a URL starting with ${schemes.map((p) => `${p}//`).join(' or ')}`),
  );
  return {
    env,
    schema: (def === undefined ? v.optional(checked) : v.optional(checked, def)) as v.GenericSchema<string | undefined, D extends string ? string : string | undefined>,
    type: `URL (${schemes.map((p) => `\`${p}//\``).join(', ')})`,
    unit: undefined,
    default: def,
    doc,
  };
}

/** Free text, or text matching `pattern` (whose message starts with the variable's name). */
export function text(env: string, def: string, doc: string, o: { type: string; pattern?: readonly [RegExp, string] } = { type: 'text' }): Setting<string> {
  const schema = o.pattern === undefined ? v.optional(v.string(), def) : v.pipe(v.optional(v.string(), def), v.regex(o.pattern[0], o.pattern[1]));
  return { env, schema, type: o.type, unit: undefined, default: def === '' ? undefined : def, doc };
}

/** A variable without a default whose value `loadConfig` checks itself. */
export function optionalText(env: string, doc: string, type: string): Setting<string | undefined> {
  return { env, schema: v.optional(v.string()), type, unit: undefined, default: undefined, doc };
}
