import * as v from 'valibot';
import { DatasetId, displayText, keyNameProblem, optionText } from './schemas.js';

/** Field types: what a value of `record.field_to_value` may be. */
export const FIELD_TYPES = ['text', 'number', 'boolean', 'json', 'chat'] as const;
/** Question types: what a value of `response.values` may be. */
export const QUESTION_TYPES = ['text', 'number', 'rating', 'label', 'multi_label', 'ranking', 'json'] as const;

/** Bounds that keep one definition (and the validators compiled from it) small. */
export const DATASET_LIMITS = { fields: 200, questions: 200, options: 500, optionLength: 200, title: 200, description: 2000 } as const;

const keyName = v.pipe(
  v.string('must be a string'),
  v.check((s) => keyNameProblem(s) === undefined, (issue) => `must be a valid key name (${keyNameProblem(issue.input as string) ?? ''})`),
);
const distinct = <T>(list: readonly T[]): boolean => new Set(list).size === list.length;
const optionList = <T extends string | number>(itemSchema: v.GenericSchema<unknown, T>, min: number) =>
  v.pipe(
    v.array(itemSchema, 'must be a list'),
    v.minLength(min, `must have at least ${min} entries`),
    v.maxLength(DATASET_LIMITS.options, `must have at most ${DATASET_LIMITS.options} entries`),
    v.check((list) => distinct(list), 'must not repeat an entry'),
  );
const optionString = optionText(DATASET_LIMITS.optionLength);
const required = v.optional(v.boolean('must be true or false'), true);
const finite = v.pipe(v.number('must be a number'), v.check((n) => Number.isFinite(n), 'must be a finite number'));

const Field = v.strictObject({
  name: keyName,
  type: v.picklist(FIELD_TYPES, `must be one of ${FIELD_TYPES.join(', ')}`),
  required,
  title: v.exactOptional(displayText(DATASET_LIMITS.title)),
});

const questionCommon = { name: keyName, required, title: v.exactOptional(displayText(DATASET_LIMITS.title)) };

const Question = v.variant('type', [
  v.strictObject({ ...questionCommon, type: v.literal('text') }),
  v.strictObject({ ...questionCommon, type: v.literal('json') }),
  v.pipe(
    v.strictObject({ ...questionCommon, type: v.literal('number'), min: v.exactOptional(finite), max: v.exactOptional(finite) }),
    v.forward(v.check((q) => q.min === undefined || q.max === undefined || q.min <= q.max, 'must not be below min'), ['max']),
  ),
  v.strictObject({ ...questionCommon, type: v.literal('rating'), values: optionList(v.pipe(v.number('must be a number'), v.safeInteger('must be a whole number')), 1) }),
  v.strictObject({ ...questionCommon, type: v.literal('label'), options: optionList(optionString, 1) }),
  v.strictObject({ ...questionCommon, type: v.literal('multi_label'), options: optionList(optionString, 1) }),
  /** Without `options`, a ranking ranks the dataset's field names (the contract's example). */
  v.strictObject({ ...questionCommon, type: v.literal('ranking'), options: v.exactOptional(optionList(optionString, 2)) }),
], `must have a type, one of ${QUESTION_TYPES.join(', ')}`);

/** Most distinct submitting annotators a completion rule may ask for. */
export const COMPLETION_MAX_SUBMITTED = 1000;

/**
 * `completion: {min_submitted: N}`: a record of the dataset is `completed` once N distinct
 * annotators have a `submitted` response to it, `pending` before (worker/completion.ts).
 */
export const CompletionRule = v.strictObject({
  min_submitted: v.pipe(
    v.number('must be a number'),
    v.safeInteger('must be a whole number'),
    v.minValue(1, 'must be at least 1'),
    v.maxValue(COMPLETION_MAX_SUBMITTED, `must be at most ${COMPLETION_MAX_SUBMITTED}`),
  ),
}, 'must be an object {"min_submitted": N}');
export type CompletionRule = v.InferOutput<typeof CompletionRule>;

const uniqueNames = (list: readonly { name: string }[]) => distinct(list.map((item) => item.name));

/**
 * A dataset definition as an admin sends it (`PUT /datasets/{id}`, `npm run datasets -- apply`).
 * `id` may be left out of a PUT body (the path names it); `required` defaults to true.
 */
export const DatasetDefinitionInput = v.pipe(
  v.strictObject({
    id: v.exactOptional(DatasetId),
    title: v.exactOptional(displayText(DATASET_LIMITS.title)),
    description: v.exactOptional(displayText(DATASET_LIMITS.description)),
    fields: v.pipe(
      v.array(Field, 'must be a list'),
      v.minLength(1, 'must define at least one field'),
      v.maxLength(DATASET_LIMITS.fields, `must have at most ${DATASET_LIMITS.fields} fields`),
      v.check((list) => uniqueNames(list), 'must not define a name twice'),
    ),
    questions: v.pipe(
      v.array(Question, 'must be a list'),
      v.minLength(1, 'must define at least one question'),
      v.maxLength(DATASET_LIMITS.questions, `must have at most ${DATASET_LIMITS.questions} questions`),
      v.check((list) => uniqueNames(list), 'must not define a name twice'),
    ),
    completion: v.exactOptional(CompletionRule),
  }, 'must be a JSON object'),
  v.forward(
    v.check(
      (d) => d.questions.every((q) => q.type !== 'ranking' || q.options !== undefined || d.fields.length >= 2),
      'a ranking without options ranks the field names: define at least two fields or give it options',
    ),
    ['questions'],
  ),
);
export type DatasetDefinitionInput = v.InferOutput<typeof DatasetDefinitionInput>;
export type DatasetField = DatasetDefinitionInput['fields'][number];
export type DatasetQuestion = DatasetDefinitionInput['questions'][number];

/** A stored definition: the input with its id and times. */
export const DatasetDefinition = v.object({
  ...DatasetDefinitionInput.pipe[0].entries,
  id: DatasetId,
  created_at: v.pipe(v.string(), v.description('ISO 8601.')),
  updated_at: v.pipe(v.string(), v.description('ISO 8601; a write accepted after this is checked against this version.')),
});
export type DatasetDefinition = v.InferOutput<typeof DatasetDefinition>;

/** The options a ranking question orders: its own, or the dataset's field names. */
export function rankingOptions(question: Extract<DatasetQuestion, { type: 'ranking' }>, fields: readonly DatasetField[]): readonly string[] {
  return question.options ?? fields.map((f) => f.name);
}
