import * as v from 'valibot';
import { AppError } from '../shared/errors.js';
import { toDetails } from '../shared/issue-details.js';

/** `input` checked against `schema`, or a 400 `validation_failed` listing every problem. */
export function parseBody<S extends v.GenericSchema>(schema: S, input: unknown): v.InferOutput<S> {
  return parseInput(schema, input, '');
}

/**
 * The query string checked against `schema` (a strict object of strings: an unknown parameter is
 * a 400, as is a repeated one; grouped parameters such as `metadata.<key>` come as an object), or a
 * 400 `validation_failed` whose paths start with `query.`.
 */
export function parseQuery<S extends v.GenericSchema>(schema: S, query: Readonly<Record<string, unknown>>): v.InferOutput<S> {
  const input: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(query)) input[name] = value;
  return parseInput(schema, input, 'query.');
}

/** A 400 `validation_failed` for one problem of the request, at `path` (`query.level`, `path.dataset_id`). */
export function invalidInput(path: string, message: string): AppError {
  return new AppError('validation_failed', `${path} ${message}`, { details: [{ path, message }] });
}

function parseInput<S extends v.GenericSchema>(schema: S, input: unknown, prefix: string): v.InferOutput<S> {
  const result = v.safeParse(schema, input, { abortEarly: false });
  if (result.success) return result.output;
  const details = toDetails(result.issues).map((d) => ({ path: `${prefix}${d.path}`, message: d.message }));
  const first = details[0]!;
  throw new AppError('validation_failed', `${first.path} ${first.message}`, { details });
}
