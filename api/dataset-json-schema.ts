import { rankingOptions, type DatasetDefinition, type DatasetField, type DatasetQuestion } from '../shared/dataset-definition.js';

type JsonSchema = Record<string, unknown>;

const DIALECT = 'https://json-schema.org/draft/2020-12/schema';

function fieldSchema(field: DatasetField): JsonSchema {
  switch (field.type) {
    case 'text': return { type: 'string' };
    case 'number': return { type: 'number' };
    case 'boolean': return { type: 'boolean' };
    case 'json': return {};
    case 'chat':
      return {
        type: 'array',
        minItems: 1,
        items: { type: 'object', properties: { role: { type: 'string', minLength: 1 }, content: { type: 'string' } }, required: ['role', 'content'], additionalProperties: false },
      };
  }
}

function questionSchema(question: DatasetQuestion, fields: readonly DatasetField[], complete: boolean): JsonSchema {
  switch (question.type) {
    case 'text': return { type: 'string', minLength: 1 };
    case 'json': return {};
    case 'number': return { type: 'number', ...(question.min === undefined ? {} : { minimum: question.min }), ...(question.max === undefined ? {} : { maximum: question.max }) };
    case 'rating': return { enum: [...question.values] };
    case 'label': return { enum: [...question.options] };
    case 'multi_label': return { type: 'array', items: { enum: [...question.options] }, minItems: 1, uniqueItems: true };
    case 'ranking': {
      const options = rankingOptions(question, fields);
      return { type: 'array', items: { enum: [...options] }, minItems: complete ? options.length : 1, uniqueItems: true };
    }
  }
}

function valuesSchema(definition: DatasetDefinition, complete: boolean, minProperties: number): JsonSchema {
  return {
    type: 'object',
    properties: Object.fromEntries(definition.questions.map((q) => [q.name, questionSchema(q, definition.fields, complete)])),
    ...(complete ? { required: definition.questions.filter((q) => q.required).map((q) => q.name) } : {}),
    additionalProperties: false,
    minProperties,
  };
}

/** A response: `submitted` (or no status, in a record body) needs every required question; `draft` and `discarded` may be partial. */
function responseSchema(definition: DatasetDefinition, statusRequired: boolean): JsonSchema {
  const statusIs = (status: string) => ({ properties: { status: { const: status } }, required: ['status'] });
  return {
    type: 'object',
    properties: {
      status: { enum: ['draft', 'submitted', 'discarded'], ...(statusRequired ? {} : { default: 'submitted' }) },
      values: { type: 'object' },
      user_id: { type: 'string', minLength: 1, maxLength: 256 },
    },
    required: statusRequired ? ['status', 'values'] : ['values'],
    additionalProperties: false,
    if: statusIs('discarded'),
    then: { properties: { values: valuesSchema(definition, false, 0) } },
    else: {
      if: statusIs('draft'),
      then: { properties: { values: valuesSchema(definition, false, 1) } },
      else: { properties: { values: valuesSchema(definition, true, 1) } },
    },
  };
}

/**
 * JSON Schemas (2020-12) of a valid `POST /feedback-record` body and `POST /feedback-response`
 * body for one dataset, so that a client can check before it sends. What JSON Schema cannot say
 * (the key-name rules at every depth of `json` values, nesting depth, unpaired surrogates) is in
 * their descriptions; the API checks it too.
 */
export function datasetJsonSchemas(definition: DatasetDefinition): { record_body: JsonSchema; response_body: JsonSchema } {
  const note = 'Keys at every depth: 1 to 200 characters, not starting with $, no ".", no NUL, not __proto__, constructor or prototype; nesting at most 32 levels.';
  const fieldToValue: JsonSchema = {
    type: 'object',
    properties: Object.fromEntries(definition.fields.map((f) => [f.name, fieldSchema(f)])),
    required: definition.fields.filter((f) => f.required).map((f) => f.name),
    additionalProperties: false,
    minProperties: 1,
  };
  return {
    record_body: {
      $schema: DIALECT,
      title: `POST /feedback-record body for the dataset ${definition.id}`,
      description: note,
      type: 'object',
      properties: {
        record: {
          type: 'object',
          properties: {
            feedback_dataset_id: { const: definition.id },
            field_to_value: fieldToValue,
            external_id: { type: 'string', minLength: 1, maxLength: 1024 },
            metadata: { type: 'object' },
          },
          required: ['feedback_dataset_id', 'field_to_value'],
          additionalProperties: false,
        },
        response: responseSchema(definition, false),
      },
      required: ['record', 'response'],
      additionalProperties: false,
    },
    response_body: {
      $schema: DIALECT,
      title: `POST /feedback-response body for a record of the dataset ${definition.id}`,
      description: note,
      type: 'object',
      properties: {
        feedback_record_id: { type: 'string', minLength: 1, maxLength: 200 },
        response: responseSchema(definition, true),
      },
      required: ['feedback_record_id', 'response'],
      additionalProperties: false,
    },
  };
}
