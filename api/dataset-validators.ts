import * as v from 'valibot';
import { rankingOptions, type DatasetDefinition, type DatasetField, type DatasetQuestion } from '../shared/dataset-definition.js';
import type { ErrorDetail } from '../shared/errors.js';
import { type ResponseStatus } from '../shared/schemas.js';
import { formatPath } from '../shared/issue-details.js';

/** Options listed in a message at most; a longer list is summarised, so that an answer stays short. */
const MAX_LISTED_OPTIONS = 20;

function oneOf(options: readonly (string | number)[]): string {
  if (options.length > MAX_LISTED_OPTIONS) return `must be one of the ${options.length} options of this question`;
  return `must be one of ${options.join(', ')}`;
}

const distinct = (list: readonly unknown[]): boolean => new Set(list).size === list.length;

const ChatMessage = v.strictObject(
  { role: v.pipe(v.string('must be a string'), v.minLength(1, 'must not be empty')), content: v.string('must be a string') },
  'must be a {role, content} message',
);

function fieldSchema(field: DatasetField): v.GenericSchema {
  switch (field.type) {
    case 'text': return v.string('must be a string');
    case 'number': return v.number('must be a number');
    case 'boolean': return v.boolean('must be true or false');
    case 'json': return v.unknown();
    case 'chat': return v.pipe(v.array(ChatMessage, 'must be a list of {role, content} messages'), v.minLength(1, 'must have at least one message'));
  }
}

/** `complete`: the response is submitted, so a ranking must order every option. */
function questionSchema(question: DatasetQuestion, fields: readonly DatasetField[], complete: boolean): v.GenericSchema {
  switch (question.type) {
    case 'text': return v.pipe(v.string('must be a string'), v.minLength(1, 'must not be empty'));
    case 'json': return v.unknown();
    case 'number': {
      const checks: v.GenericPipeItem<number>[] = [];
      if (question.min !== undefined) checks.push(v.minValue(question.min, `must be at least ${question.min}`));
      if (question.max !== undefined) checks.push(v.maxValue(question.max, `must be at most ${question.max}`));
      return v.pipe(v.number('must be a number'), ...checks);
    }
    case 'rating': return v.picklist(question.values, oneOf(question.values));
    case 'label': return v.picklist(question.options, oneOf(question.options));
    case 'multi_label':
      return v.pipe(
        v.array(v.picklist(question.options, oneOf(question.options)), 'must be a list of options'),
        v.minLength(1, 'must choose at least one option'),
        v.check((list) => distinct(list), 'must not choose an option twice'),
      );
    case 'ranking': {
      const options = rankingOptions(question, fields);
      const checks: v.GenericPipeItem<string[]>[] = [v.minLength(1, 'must rank at least one option'), v.check((list) => distinct(list), 'must not rank an option twice')];
      if (complete) checks.push(v.check((list) => list.length === options.length, `must rank every option when submitted: ${options.length > MAX_LISTED_OPTIONS ? `${options.length} options` : options.join(', ')}`));
      return v.pipe(v.array(v.picklist(options, oneOf(options)), 'must be a list of options in order'), ...checks);
    }
  }
}

/** A closed object of `entries`: a key the dataset does not define is one issue of type `never`. */
function closed(entries: Record<string, v.GenericSchema>): v.GenericSchema {
  return v.objectWithRest(entries, v.never());
}

function details(issues: readonly v.BaseIssue<unknown>[], prefix: string, what: string): ErrorDetail[] {
  return issues.map((issue) => {
    const sub = formatPath(issue.path);
    const path = sub.startsWith('[') ? prefix + sub : `${prefix}.${sub}`;
    if (issue.type === 'never') return { path, message: `is not a ${what} of this dataset` };
    if (issue.kind === 'schema' && issue.received === 'undefined' && issue.path !== undefined) return { path, message: 'is required' };
    return { path, message: issue.message };
  });
}

/** The validators of one definition, compiled once when the definition is loaded. */
export interface CompiledDataset {
  readonly definition: DatasetDefinition;
  /** Problems of `record.field_to_value` (empty when valid). */
  checkRecord(fieldToValue: Readonly<Record<string, unknown>>): ErrorDetail[];
  /** Problems of `response.values`: `submitted` needs every required question and complete rankings. */
  checkResponse(values: Readonly<Record<string, unknown>>, status: ResponseStatus): ErrorDetail[];
  /**
   * Problems of a suggestion (`at`: its path in the body, e.g. `suggestion`): the question must be
   * one of the dataset's, the value one a draft response could give it (a ranking may be partial).
   */
  checkSuggestion(question: string, value: unknown, at: string): ErrorDetail[];
}

/**
 * Builds valibot schemas from `definition`, once each: one for the record's fields, one for a submitted
 * response (required questions required, rankings complete), one for a draft or discarded
 * response (any subset of the questions, Argilla's rule). Values were already checked against
 * the contract's key and JSON rules (shared/schemas.ts); these add the dataset's own.
 */
export function compileDataset(definition: DatasetDefinition): CompiledDataset {
  // Each schema is built on its first use and kept: a process holding many definitions pays the
  // memory of the validators only for the datasets that receive writes.
  let record: v.GenericSchema | undefined;
  let submitted: v.GenericSchema | undefined;
  let partial: v.GenericSchema | undefined;
  const buildRecord = () => {
    const entries: Record<string, v.GenericSchema> = {};
    for (const field of definition.fields) entries[field.name] = field.required ? fieldSchema(field) : v.exactOptional(fieldSchema(field));
    return closed(entries);
  };
  const buildResponse = (complete: boolean) => {
    const entries: Record<string, v.GenericSchema> = {};
    for (const question of definition.questions) {
      const schema = questionSchema(question, definition.fields, complete);
      entries[question.name] = complete && question.required ? schema : v.exactOptional(schema);
    }
    return closed(entries);
  };
  const run = (schema: v.GenericSchema, input: unknown, prefix: string, what: string): ErrorDetail[] => {
    const result = v.safeParse(schema, input, { abortEarly: false });
    return result.success ? [] : details(result.issues, prefix, what);
  };
  const suggestionSchemas = new Map<string, v.GenericSchema>();
  const suggestionSchema = (question: DatasetQuestion): v.GenericSchema => {
    let schema = suggestionSchemas.get(question.name);
    if (schema === undefined) {
      schema = v.object({ value: questionSchema(question, definition.fields, false) });
      suggestionSchemas.set(question.name, schema);
    }
    return schema;
  };
  return {
    definition,
    checkSuggestion(questionName, value, at) {
      const question = definition.questions.find((q) => q.name === questionName);
      if (question === undefined) return [{ path: `${at}.question`, message: `is not a question of this dataset (its questions: ${definition.questions.slice(0, MAX_LISTED_OPTIONS).map((q) => q.name).join(', ')})` }];
      return run(suggestionSchema(question), { value }, at, 'question');
    },
    checkRecord: (fieldToValue) => run((record ??= buildRecord()), fieldToValue, 'record.field_to_value', 'field'),
    checkResponse: (values, status) =>
      run(status === 'submitted' ? (submitted ??= buildResponse(true)) : (partial ??= buildResponse(false)), values, 'response.values', 'question'),
  };
}
