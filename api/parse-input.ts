import * as v from 'valibot';
import { AppError } from '../shared/errors.js';
import { formatPath, toDetails } from '../shared/issue-details.js';

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
  const repeated: string[] = [];
  for (const [name, value] of Object.entries(query)) {
    // A repeated parameter arrives as a list, which every schema would refuse with its own
    // message ("is required", "must be one of"): say what is wrong instead.
    if (Array.isArray(value)) repeated.push(name);
    else input[name] = value;
  }
  if (repeated.length > 0) {
    const details = repeated.map((name) => ({ path: prefixed('query.', formatPath([{ key: name } as v.IssuePathItem])), message: 'must be given once' }));
    throw new AppError('validation_failed', `${details[0]!.path} ${details[0]!.message}`, { details });
  }
  return parseInput(schema, input, 'query.');
}

/** A 400 `validation_failed` for one problem of the request, at `path` (`query.level`, `path.dataset_id`). */
export function invalidInput(path: string, message: string): AppError {
  return new AppError('validation_failed', `${path} ${message}`, { details: [{ path, message }] });
}

/** `query.` before a path: `query.level`, but `query["level[]"]` where the path starts with a quoted key. */
function prefixed(prefix: string, path: string): string {
  return prefix.endsWith('.') && path.startsWith('[') ? `${prefix.slice(0, -1)}${path}` : `${prefix}${path}`;
}

function parseInput<S extends v.GenericSchema>(schema: S, input: unknown, prefix: string): v.InferOutput<S> {
  const result = v.safeParse(schema, input, { abortEarly: false });
  if (result.success) return result.output;
  const details = toDetails(result.issues).map((d) => ({ path: prefixed(prefix, d.path), message: d.message }));
  const first = details[0]!;
  throw new AppError('validation_failed', `${first.path} ${first.message}`, { details });
}
