import * as v from 'valibot';

/** JSON nesting deeper than this (counting the body itself as level 1) is rejected. */
const MAX_JSON_DEPTH = 32;
export const KEY_NAME_MAX_LENGTH = 200;
/** Problems reported at most per JSON object field, so one bad body cannot make a huge answer. */
const MAX_ISSUES_PER_FIELD = 50;
const FORBIDDEN_KEYS: ReadonlySet<string> = new Set(['__proto__', 'constructor', 'prototype']);

/** Why `key` may not be used as a stored key, or undefined when it may. */
export function keyNameProblem(key: string): string | undefined {
  if (key.length === 0) return 'key must not be empty';
  if (key.length > KEY_NAME_MAX_LENGTH) return `key must be at most ${KEY_NAME_MAX_LENGTH} characters`;
  if (key.startsWith('$')) return 'key must not start with $';
  if (key.includes('.')) return 'key must not contain .';
  if (key.includes('\0')) return 'key must not contain NUL';
  if (FORBIDDEN_KEYS.has(key)) return `key must not be ${key}`;
  return undefined;
}

/** Matches a UTF-16 surrogate that is not part of a pair (in a `u` regex, pairs are one code point). */
const LONE_SURROGATE = /\p{Cs}/u;

/** True when `s` can be stored as UTF-8 unchanged (JSON escapes like "\ud800" parse to lone surrogates). */
function isWellFormedText(s: string): boolean {
  return !LONE_SURROGATE.test(s);
}

/**
 * Why a JSON leaf cannot be stored as sent, or undefined. JSON.parse turns 1e400 into Infinity,
 * which would be queued and stored as null; a lone surrogate would be stored as U+FFFD.
 */
function leafProblem(value: unknown): string | undefined {
  if (typeof value === 'number' && !Number.isFinite(value)) return 'number must be within the range of a double';
  if (typeof value === 'string' && !isWellFormedText(value)) return 'string must not contain unpaired surrogates (\\ud800-\\udfff)';
  return undefined;
}

/** Exported so that api/openapi.ts can recognise the `v.custom` object checks of this file. */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

type PathItem = v.IssuePathItem;

/** Where a value sits below the checked object: its own step and its parent's (a list built only when a problem is reported). */
interface PathNode {
  readonly parent: PathNode | undefined;
  readonly item: PathItem;
}

function pathOf(node: PathNode | undefined, last?: PathItem): PathItem[] {
  const path: PathItem[] = last === undefined ? [] : [last];
  for (let n = node; n !== undefined; n = n.parent) path.push(n.item);
  return path.reverse();
}

/** `{ path }` for an issue at `path`, or nothing for the checked object itself. */
const issueAt = (path: PathItem[]) => (path.length > 0 ? { path: path as [PathItem, ...PathItem[]] } : {});

/**
 * A JSON object whose keys (at every depth) follow the key-name rules and whose nesting stays
 * within {@link MAX_JSON_DEPTH}. `level` is the nesting level at which the object sits in the
 * request body (the body is level 1). Walks iteratively: a hostile body cannot overflow the stack.
 * Every key of every body passes through here, so a path is put together only for a problem.
 */
export function jsonObject(level: number) {
  return v.pipe(
    v.custom<Record<string, unknown>>(isPlainObject, 'must be an object'),
    v.rawCheck<Record<string, unknown>>(({ dataset, addIssue }) => {
      if (!dataset.typed) return;
      let issues = 0;
      const stack: { value: unknown; depth: number; at: PathNode | undefined }[] = [{ value: dataset.value, depth: level, at: undefined }];
      while (stack.length > 0 && issues < MAX_ISSUES_PER_FIELD) {
        const { value, depth, at } = stack.pop()!;
        if (depth > MAX_JSON_DEPTH) {
          issues++;
          addIssue({ message: `nesting must not be deeper than ${MAX_JSON_DEPTH} levels`, ...issueAt(pathOf(at)) });
          continue;
        }
        if (Array.isArray(value)) {
          for (let i = value.length - 1; i >= 0; i--) {
            const item: unknown = value[i];
            const leaf = leafProblem(item);
            if (leaf !== undefined) {
              issues++;
              addIssue({ message: leaf, ...issueAt(pathOf(at, { type: 'array', origin: 'value', input: value, key: i, value: item })) });
            } else if (typeof item === 'object' && item !== null) {
              stack.push({ value: item, depth: depth + 1, at: { parent: at, item: { type: 'array', origin: 'value', input: value, key: i, value: item } } });
            }
          }
        } else if (isPlainObject(value)) {
          const children: { value: unknown; depth: number; at: PathNode | undefined }[] = [];
          for (const key of Object.keys(value)) {
            const item = value[key];
            const problem = keyNameProblem(key) ?? (isWellFormedText(key) ? leafProblem(item) : 'key must not contain unpaired surrogates (\\ud800-\\udfff)');
            if (problem !== undefined) {
              issues++;
              addIssue({ message: problem, ...issueAt(pathOf(at, { type: 'object', origin: 'value', input: value, key, value: item })) });
            } else if (typeof item === 'object' && item !== null) {
              children.push({ value: item, depth: depth + 1, at: { parent: at, item: { type: 'object', origin: 'value', input: value, key, value: item } } });
            }
          }
          for (let i = children.length - 1; i >= 0; i--) stack.push(children[i]!);
        }
      }
    }),
    // JSON Schema cannot say this (rawCheck above): the OpenAPI document shows it as a description.
    v.description(
      `Any JSON object. Keys at every depth: 1 to ${KEY_NAME_MAX_LENGTH} characters, not starting with $, no ".", no NUL, ` +
        `not __proto__, constructor or prototype. Nesting at most ${MAX_JSON_DEPTH} levels (the body is level 1); ` +
        'numbers within the double range; no unpaired surrogates in strings or keys.',
    ),
  );
}

/**
 * A closed object: a plain object (not a list) whose unknown properties are ALL reported (valibot's
 * strictObject stops at the first). Keys that objectWithRest skips (`__proto__`, …) are reported too.
 */
export function closedObject<const E extends v.ObjectEntries>(entries: E, message = 'must be an object') {
  return v.pipe(
    // Typed as the object's input so that v.InferInput of a body is its wire shape (client/ uses it).
    v.custom<v.InferInput<v.StrictObjectSchema<E, undefined>>>(isPlainObject, message),
    v.rawCheck<v.InferInput<v.StrictObjectSchema<E, undefined>>>(({ dataset, addIssue }) => {
      if (!dataset.typed) return;
      const value = dataset.value as Record<string, unknown>;
      for (const key of Object.keys(value)) {
        if (FORBIDDEN_KEYS.has(key) && !Object.hasOwn(entries, key)) {
          addIssue({ message: 'is not a known property', path: [{ type: 'object', origin: 'value', input: value, key, value: value[key] }] });
        }
      }
    }),
    v.objectWithRest(entries, v.never('is not a known property')),
    v.transform((o) => o as v.InferOutput<v.StrictObjectSchema<E, undefined>>),
  );
}

/** Exported so that api/openapi.ts can turn the check into `minProperties: 1`. */
export function hasAnyKey(o: Record<string, unknown>): boolean {
  return Object.keys(o).length > 0;
}
const nonEmptyObject = v.check(hasAnyKey, 'must have at least one key');

type ResponseFields = { status?: string; values: Record<string, unknown> };
/**
 * `values` may be empty only when the response is discarded. valibot runs a partialCheck when
 * its two paths have no issue of their own, which is also the case when the object schema around
 * them never ran (closedObject stops before it once a forbidden key like "prototype" is
 * reported): `values` may then be missing or of any type, and the other issues already refuse the
 * body, so the check passes on anything that is not an object.
 */
const valuesFilledUnlessDiscarded = v.forward(
  v.partialCheck<ResponseFields, [['values'], ['status']], ResponseFields, string>(
    [['values'], ['status']],
    (input) => input.status === 'discarded' || !isPlainObject(input.values) || Object.keys(input.values).length > 0,
    'must have at least one key unless status is discarded',
  ),
  ['values'],
);

type ValuesCheck<T> = v.BaseValidation<T, T, v.PartialCheckIssue<ResponseFields>>;
/** `schema` (a response: `status`, `values`, …) with {@link valuesFilledUnlessDiscarded} after it. */
export function withValuesFilledUnlessDiscarded<const TSchema extends v.GenericSchema<unknown, ResponseFields>>(schema: TSchema): v.SchemaWithPipe<readonly [TSchema, ValuesCheck<v.InferOutput<TSchema>>]> {
  // The check reads only `status` and `values`; the cast lets it follow any schema that has them.
  return v.pipe<TSchema, ValuesCheck<v.InferOutput<TSchema>>>(schema, valuesFilledUnlessDiscarded as unknown as ValuesCheck<v.InferOutput<TSchema>>);
}

/**
 * The `limit` of a paged list's query string: 1 to `max` as a whole number (a string in the URL),
 * `fallback` when absent (stated as metadata, so that OpenAPI documents the default).
 */
export function queryLimit(max: number, fallback: number) {
  const message = `must be a whole number from 1 to ${max}`;
  return v.exactOptional(
    v.pipe(
      v.string(message),
      v.regex(/^\d{1,4}$/, message),
      v.transform(Number),
      // What the string becomes, stated as a schema so that OpenAPI documents an integer.
      v.number(),
      v.integer(),
      v.minValue(1, message),
      v.maxValue(max, message),
      v.metadata({ default: fallback }),
    ),
  );
}

export const ResponseStatus = v.picklist(['draft', 'submitted', 'discarded'], 'must be one of draft, submitted, discarded');
export type ResponseStatus = v.InferOutput<typeof ResponseStatus>;

const requiredString = (max: number) =>
  v.pipe(
    v.string('must be a string'),
    v.minLength(1, 'must not be empty'),
    v.maxLength(max, `must be at most ${max} characters`),
    v.check(isWellFormedText, 'must not contain unpaired surrogates (\\ud800-\\udfff)'),
  );

/** C0 and C1 control characters and DEL: never part of a name (a NUL is refused by some stores). */
// eslint-disable-next-line no-control-regex -- the point of this one is to find them
const CONTROL_CHARACTER = /[\u0000-\u001f\u007f-\u009f]/;
export const DATASET_ID_RULE =
  '1 to 256 characters, no control characters (U+0000-U+001F, U+007F-U+009F) or unpaired surrogates, not starting with $, not __proto__, constructor or prototype';

/**
 * A dataset id: a name that is safe as a MongoDB value, a map key and a path segment. Checked
 * before any store is asked, so that a bad id is a 400, never the store's 500.
 */
export const DatasetId = v.pipe(
  requiredString(256),
  v.check((s) => !CONTROL_CHARACTER.test(s), 'must not contain control characters (U+0000-U+001F, U+007F-U+009F)'),
  v.check((s) => !s.startsWith('$'), 'must not start with $'),
  v.check((s) => !FORBIDDEN_KEYS.has(s), 'must not be __proto__, constructor or prototype'),
  v.description(`The dataset id: ${DATASET_ID_RULE}.`),
);

/** Text shown to people (a title, a description): no NUL and no unpaired surrogates, at most `max` characters. */
export const displayText = (max: number) =>
  v.pipe(
    v.string('must be a string'),
    v.maxLength(max, `must be at most ${max} characters`),
    v.check((s) => !s.includes('\0'), 'must not contain NUL (U+0000)'),
    v.check(isWellFormedText, 'must not contain unpaired surrogates (\\ud800-\\udfff)'),
  );

/** A name chosen from a list (a label option): like a dataset id, without control characters. */
export const optionText = (max: number) =>
  v.pipe(
    requiredString(max),
    v.check((s) => !CONTROL_CHARACTER.test(s), 'must not contain control characters (U+0000-U+001F, U+007F-U+009F)'),
  );
/** A question name (a `values` key): the key-name rules of every stored key. */
export function questionNameSchema() {
  return v.pipe(
    v.string('must be a string'),
    v.check((key: string) => keyNameProblem(key) === undefined, 'must be a valid key name (1-200 characters, not starting with $, no . or NUL, not __proto__, constructor or prototype)'),
  );
}
export const UserId = requiredString(256);
export const RecordId = requiredString(200);
const ExternalId = requiredString(1024);

export const RecordInput = closedObject({
  feedback_dataset_id: DatasetId,
  field_to_value: v.pipe(jsonObject(3), nonEmptyObject),
  external_id: v.exactOptional(ExternalId),
  metadata: v.exactOptional(jsonObject(3)),
});
type RecordInput = v.InferOutput<typeof RecordInput>;

/** The first response, sent with its record. `status` defaults to `submitted`. */
const FirstResponseInput = withValuesFilledUnlessDiscarded(
  closedObject({
    values: jsonObject(3),
    status: v.optional(ResponseStatus, 'submitted'),
    user_id: v.exactOptional(UserId),
  }),
);

/** A response sent to an existing record: `status` is required. */
const ResponseInput = withValuesFilledUnlessDiscarded(
  closedObject({
    status: ResponseStatus,
    values: jsonObject(3),
    user_id: v.exactOptional(UserId),
  }),
);

/** Most suggestions one `POST /feedback-record` may carry. */
export const RECORD_MAX_SUGGESTIONS = 100;

/**
 * Any JSON value but null, whose objects follow the key-name rules of {@link jsonObject} (a
 * suggestion's `value`, one level below `level`). Missing is "is required".
 */
export function jsonValue(level: number) {
  const wrapped = jsonObject(level - 1);
  return v.pipe(
    v.unknown(),
    v.check((x) => x !== undefined, 'is required'),
    v.check((x) => x !== null, 'must not be null'),
    v.check((x) => x === undefined || x === null || v.is(wrapped, { value: x }), 'must be a JSON value whose object keys follow the key-name rules and whose numbers are finite'),
    v.description('Any JSON value but null: checked like a response value of the question when the dataset has a definition.'),
  );
}

/** An agent that suggests (a model, a rule): a name without control characters. */
export const AgentName = v.pipe(
  requiredString(256),
  v.check((s) => !CONTROL_CHARACTER.test(s), 'must not contain control characters (U+0000-U+001F, U+007F-U+009F)'),
);

/** A model's suggestion for one question of a record, as sent. */
const SuggestionInput = closedObject({
  question: v.pipe(questionNameSchema(), v.description('The question (`values` key) suggested for.')),
  value: jsonValue(4),
  score: v.exactOptional(v.pipe(v.number('must be a number'), v.minValue(0, 'must be from 0 to 1'), v.maxValue(1, 'must be from 0 to 1'), v.description('The agent\'s confidence, 0 to 1.'))),
  agent: v.exactOptional(v.pipe(AgentName, v.description('Who suggests (a model name and version); default the API key\'s name. One current suggestion per (record, question, agent).'))),
}, 'must be a JSON object');
export type SuggestionInput = v.InferOutput<typeof SuggestionInput>;

/** Body of `POST /feedback-suggestion`. */
export const FeedbackSuggestionBody = closedObject({ feedback_record_id: RecordId, suggestion: SuggestionInput }, 'must be a JSON object');
export type FeedbackSuggestionBody = v.InferOutput<typeof FeedbackSuggestionBody>;

/** Body of `POST /feedback-record`. */
export const FeedbackRecordBody = closedObject({
  record: RecordInput,
  response: FirstResponseInput,
  suggestions: v.exactOptional(
    v.pipe(
      v.array(SuggestionInput, 'must be a list of suggestions'),
      v.maxLength(RECORD_MAX_SUGGESTIONS, `must hold at most ${RECORD_MAX_SUGGESTIONS} suggestions`),
      v.description('Model suggestions stored with the record, as POST /feedback-suggestion would store each.'),
    ),
  ),
}, 'must be a JSON object');
export type FeedbackRecordBody = v.InferOutput<typeof FeedbackRecordBody>;

/** Body of `POST /feedback-response`. */
export const FeedbackResponseBody = closedObject({ feedback_record_id: RecordId, response: ResponseInput }, 'must be a JSON object');
export type FeedbackResponseBody = v.InferOutput<typeof FeedbackResponseBody>;

/** Most questions one feedback token may name. */
export const FEEDBACK_TOKEN_MAX_QUESTIONS = 100;

/** A `values` key a feedback token may write: the key-name rules of every stored key. */
const QuestionName = questionNameSchema();

/** Body of `POST /feedback-tokens`: the scope of a browser feedback token. */
export const FeedbackTokenBody = closedObject(
  {
    feedback_record_id: RecordId,
    user_id: UserId,
    questions: v.exactOptional(
      v.pipe(
        v.array(QuestionName, 'must be a list of strings'),
        v.minLength(1, 'must name at least one question (leave it out to allow any)'),
        v.maxLength(FEEDBACK_TOKEN_MAX_QUESTIONS, `must name at most ${FEEDBACK_TOKEN_MAX_QUESTIONS} questions`),
      ),
    ),
    expires_in_seconds: v.exactOptional(v.pipe(v.number('must be a number'), v.integer('must be a whole number'), v.minValue(1, 'must be at least 1'))),
  },
  'must be a JSON object',
);
export type FeedbackTokenBody = v.InferOutput<typeof FeedbackTokenBody>;
/**
 * A batch item answering a record created by an earlier item of the same `POST /feedback-batch`
 * call, whose id the caller cannot know yet: `record_index` is that item's index.
 */
export const BatchResponseToNewRecord = closedObject({
  record_index: v.pipe(v.number('must be a number'), v.safeInteger('must be a whole number'), v.minValue(0, 'must be at least 0')),
  response: ResponseInput,
}, 'must be a JSON object');
export type BatchResponseToNewRecord = v.InferOutput<typeof BatchResponseToNewRecord>;

/** One item of a batch, as sent: a record body, a response body, or a response to a record of the same batch. */
export type FeedbackBatchItem =
  | v.InferInput<typeof FeedbackRecordBody>
  | v.InferInput<typeof FeedbackResponseBody>
  | v.InferInput<typeof BatchResponseToNewRecord>
  | v.InferInput<typeof FeedbackSuggestionBody>;

/**
 * What a batch item is meant to be, from its shape: `record` → a record with its first response
 * ({@link FeedbackRecordBody}), `suggestion` → a suggestion ({@link FeedbackSuggestionBody}), `record_index` → a response to a record of the same batch
 * ({@link BatchResponseToNewRecord}), else a response body ({@link FeedbackResponseBody}); so a bad
 * item's details name the fields of what it was meant to be.
 */
export function batchItemKind(item: unknown): 'record' | 'response_to_batch_record' | 'response' | 'suggestion' {
  if (isPlainObject(item) && Object.hasOwn(item, 'record')) return 'record';
  if (isPlainObject(item) && Object.hasOwn(item, 'suggestion')) return 'suggestion';
  if (isPlainObject(item) && Object.hasOwn(item, 'record_index')) return 'response_to_batch_record';
  return 'response';
}

/**
 * Body of `POST /feedback-batch`. The route leaves `item` unknown and checks the items one by one
 * afterwards, so that a bad item does not refuse the others; the OpenAPI document passes what an
 * item may be.
 */
export function feedbackBatchBody(maxItems: number, item: v.GenericSchema = v.unknown()) {
  return closedObject({
    items: v.pipe(
      v.array(item, 'must be a list'),
      v.minLength(1, 'must hold at least one item'),
      v.maxLength(maxItems, `must hold at most ${maxItems} items (BATCH_REQUEST_MAX_ITEMS); split the batch`),
    ),
  }, 'must be a JSON object');
}

/**
 * What happens to records when their creator's feedback is erased (docs/erasure.md): `keep` them,
 * erase the records the user `created` (their first response was the user's: a chatbot end user's
 * words in `field_to_value`) with every response to them, or also those left with no response
 * (`created_and_orphaned`).
 */
export const ErasureRecords = v.picklist(['keep', 'created', 'created_and_orphaned'], 'must be one of keep, created, created_and_orphaned');
export type ErasureRecords = v.InferOutput<typeof ErasureRecords>;

/** Most datasets one erasure may name. */
export const ERASURE_MAX_DATASETS = 100;

/** Body of `POST /admin/erasures`: whose feedback to erase, where, and what becomes of records. */
export const ErasureBody = closedObject(
  {
    user_id: UserId,
    datasets: v.exactOptional(
      v.pipe(
        v.array(DatasetId, 'must be a list of dataset ids'),
        v.minLength(1, 'must name at least one dataset (leave it out for every dataset)'),
        v.maxLength(ERASURE_MAX_DATASETS, `must name at most ${ERASURE_MAX_DATASETS} datasets`),
      ),
    ),
    records: v.optional(ErasureRecords, 'created'),
  },
  'must be a JSON object',
);
export type ErasureBody = v.InferOutput<typeof ErasureBody>;
