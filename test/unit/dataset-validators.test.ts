import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import * as v from 'valibot';
import { datasetJsonSchemas } from '../../api/dataset-json-schema.js';
import { compileDataset, type CompiledDataset } from '../../api/dataset-validators.js';
import { DatasetDefinitionInput, type DatasetDefinition } from '../../shared/dataset-definition.js';
import { type ResponseStatus } from '../../shared/schemas.js';
import { toDetails } from '../../shared/issue-details.js';

/** A definition with every field type and every question type (and a ranking of the field names). */
const EVERY_TYPE = {
  fields: [
    { name: 'prompt', type: 'text' },
    { name: 'score', type: 'number' },
    { name: 'flag', type: 'boolean' },
    { name: 'extra', type: 'json', required: false },
    { name: 'chat', type: 'chat', required: false },
  ],
  questions: [
    { name: 'note', type: 'text' },
    { name: 'confidence', type: 'number', min: 0, max: 1 },
    { name: 'rating', type: 'rating', values: [1, 2, 3, 4, 5] },
    { name: 'label', type: 'label', options: ['good', 'bad'] },
    { name: 'topics', type: 'multi_label', options: ['a', 'b', 'c'], required: false },
    { name: 'order', type: 'ranking', required: false },
    { name: 'raw', type: 'json', required: false },
  ],
};

export function definitionOf(input: unknown, id = 'ds_every'): DatasetDefinition {
  const parsed = v.parse(DatasetDefinitionInput, input);
  return { ...parsed, id, created_at: '2026-01-01T00:00:00.000Z', updated_at: '2026-01-01T00:00:00.000Z' };
}

const VALID_FIELDS = { prompt: 'hi', score: 2.5, flag: false, extra: { any: [1, null] }, chat: [{ role: 'user', content: 'hi' }] };
const VALID_VALUES = { note: 'fine', confidence: 0.5, rating: 4, label: 'good', topics: ['a', 'c'], order: ['chat', 'extra', 'flag', 'prompt', 'score'], raw: null };

describe('dataset validators (compiled from a definition)', () => {
  let ds: CompiledDataset;
  before(() => {
    ds = compileDataset(definitionOf(EVERY_TYPE));
  });
  const fieldProblems = (fields: Record<string, unknown>) => ds.checkRecord(fields);
  const valueProblems = (values: Record<string, unknown>, status: ResponseStatus = 'submitted') => ds.checkResponse(values, status);

  it('accepts a record and a submitted response with every type valid', () => {
    expect(fieldProblems(VALID_FIELDS)).to.deep.equal([]);
    expect(valueProblems(VALID_VALUES)).to.deep.equal([]);
    expect(fieldProblems({ prompt: 'hi', score: 0, flag: true }), 'optional fields left out').to.deep.equal([]);
  });

  const fieldCases: [string, unknown, string][] = [
    ['prompt', 3, 'must be a string'],
    ['score', '3', 'must be a number'],
    ['flag', 'true', 'must be true or false'],
    ['chat', 'hello', 'must be a list of {role, content} messages'],
    ['chat', [], 'must have at least one message'],
  ];
  for (const [name, value, message] of fieldCases) {
    it(`field ${name} = ${JSON.stringify(value)}: ${message}`, () => {
      expect(fieldProblems({ ...VALID_FIELDS, [name]: value })).to.deep.equal([{ path: `record.field_to_value.${name}`, message }]);
    });
  }
  it('a chat message must be {role, content} and nothing else', () => {
    const problems = fieldProblems({ ...VALID_FIELDS, chat: [{ role: 'user' }, { role: '', content: 'x' }, { role: 'user', content: 'x', at: 1 }] });
    expect(problems.map((p) => p.path)).to.deep.equal(['record.field_to_value.chat[0].content', 'record.field_to_value.chat[1].role', 'record.field_to_value.chat[2].at']);
    expect(problems[0]!.message).to.equal('is required');
  });
  it('json fields take any JSON value, null included', () => {
    for (const extra of [null, 1, 'x', [1], { a: { b: [] } }, true]) expect(fieldProblems({ ...VALID_FIELDS, extra })).to.deep.equal([]);
  });
  it('reports every missing required field and every unknown field, each with its path', () => {
    expect(fieldProblems({ prompt: 'hi', answr: 'typo', 'two words': 1 })).to.have.deep.members([
      { path: 'record.field_to_value.score', message: 'is required' },
      { path: 'record.field_to_value.flag', message: 'is required' },
      { path: 'record.field_to_value.answr', message: 'is not a field of this dataset' },
      { path: 'record.field_to_value["two words"]', message: 'is not a field of this dataset' },
    ]);
  });

  const valueCases: [string, unknown, string][] = [
    ['note', '', 'must not be empty'],
    ['note', 1, 'must be a string'],
    ['confidence', 1.5, 'must be at most 1'],
    ['confidence', -0.1, 'must be at least 0'],
    ['confidence', '0.5', 'must be a number'],
    ['rating', 11, 'must be one of 1, 2, 3, 4, 5'],
    ['rating', 2.5, 'must be one of 1, 2, 3, 4, 5'],
    ['rating', '4', 'must be one of 1, 2, 3, 4, 5'],
    ['label', 'meh', 'must be one of good, bad'],
    ['topics', [], 'must choose at least one option'],
    ['topics', ['a', 'a'], 'must not choose an option twice'],
    ['topics', 'a', 'must be a list of options'],
    ['order', ['prompt', 'prompt', 'score', 'flag', 'extra'], 'must not rank an option twice'],
    ['order', 'prompt', 'must be a list of options in order'],
  ];
  for (const [name, value, message] of valueCases) {
    it(`question ${name} = ${JSON.stringify(value)}: ${message}`, () => {
      expect(valueProblems({ ...VALID_VALUES, [name]: value })).to.deep.include({ path: `response.values.${name}`, message });
    });
  }
  it('a multi_label or ranking entry outside its options names the entry', () => {
    expect(valueProblems({ ...VALID_VALUES, topics: ['a', 'z'] })).to.deep.equal([{ path: 'response.values.topics[1]', message: 'must be one of a, b, c' }]);
    expect(valueProblems({ ...VALID_VALUES, order: ['chat', 'extra', 'flag', 'prompt', 'nope'] })).to.deep.include({ path: 'response.values.order[4]', message: 'must be one of prompt, score, flag, extra, chat' });
  });
  it('a ranking without options ranks the field names; submitted, it must rank every one', () => {
    expect(valueProblems({ ...VALID_VALUES, order: ['prompt', 'score'] })).to.deep.equal([
      { path: 'response.values.order', message: 'must rank every option when submitted: prompt, score, flag, extra, chat' },
    ]);
    expect(valueProblems({ ...VALID_VALUES, order: ['prompt', 'score'] }, 'draft'), 'a draft may rank some').to.deep.equal([]);
    expect(valueProblems({ order: [] }, 'draft'), 'but not none').to.deep.equal([{ path: 'response.values.order', message: 'must rank at least one option' }]);
  });
  it('submitted needs every required question; draft and discarded may be partial', () => {
    expect(valueProblems({ note: 'x' }).map((p) => p.path)).to.have.members(['response.values.confidence', 'response.values.rating', 'response.values.label']);
    expect(valueProblems({ note: 'x' }).every((p) => p.message === 'is required')).to.equal(true);
    expect(valueProblems({ rating: 3 }, 'draft')).to.deep.equal([]);
    expect(valueProblems({}, 'discarded')).to.deep.equal([]);
  });
  it('a draft is still checked: unknown questions and bad values are refused', () => {
    expect(valueProblems({ ratng: 3, rating: 9 }, 'draft')).to.have.deep.members([
      { path: 'response.values.ratng', message: 'is not a question of this dataset' },
      { path: 'response.values.rating', message: 'must be one of 1, 2, 3, 4, 5' },
    ]);
  });
  it('long option lists are summarised in messages', () => {
    const many = compileDataset(definitionOf({ fields: [{ name: 'f', type: 'text' }], questions: [{ name: 'q', type: 'label', options: Array.from({ length: 30 }, (_, i) => `o${i}`) }] }));
    expect(many.checkResponse({ q: 'x' }, 'submitted')).to.deep.equal([{ path: 'response.values.q', message: 'must be one of the 30 options of this question' }]);
  });
});

describe('dataset definitions (the rules of a definition)', () => {
  const problems = (input: unknown) => {
    const r = v.safeParse(DatasetDefinitionInput, input, { abortEarly: false });
    return r.success ? [] : toDetails(r.issues);
  };
  it('the example of docs/datasets is valid, and required defaults to true', () => {
    const example = JSON.parse(readFileSync(new URL('../../docs/datasets/ds_support_bot.json', import.meta.url), 'utf8')) as unknown;
    expect(problems(example)).to.deep.equal([]);
    expect(v.parse(DatasetDefinitionInput, example).fields[0]!.required).to.equal(true);
  });
  it('docs/datasets/README.md shows the example file as it is', () => {
    const read = (file: string) => readFileSync(new URL(`../../docs/datasets/${file}`, import.meta.url), 'utf8');
    const shown = /The complete example[^]*?```json\n([^]*?)```/.exec(read('README.md'))?.[1];
    expect(shown, 'the README\'s json block after "The complete example"').to.be.a('string');
    expect(JSON.parse(shown!)).to.deep.equal(JSON.parse(read('ds_support_bot.json')));
  });
  it('refuses duplicate names, bad key names, unknown types, empty lists and unknown properties', () => {
    const found = problems({
      fields: [{ name: 'a', type: 'text' }, { name: 'a', type: 'text' }, { name: 'b.c', type: 'text' }, { name: 'd', type: 'string' }],
      questions: [{ name: 'q', type: 'rating', values: [] }, { name: 'r', type: 'stars' }, { name: 'n', type: 'number', min: 5, max: 1 }, { name: 'l', type: 'label', options: ['x', 'x'] }],
      colour: 'red',
    });
    const paths = found.map((d) => d.path);
    expect(paths).to.include.members(['fields[2].name', 'fields[3].type', 'questions[0].values', 'questions[1].type', 'questions[2].max', 'questions[3].options', 'colour']);
  });
  it('refuses a name defined twice', () => {
    expect(problems({ fields: [{ name: 'a', type: 'text' }, { name: 'a', type: 'json' }], questions: [{ name: 'q', type: 'text' }, { name: 'q', type: 'json' }] })).to.deep.equal([
      { path: 'fields', message: 'must not define a name twice' },
      { path: 'questions', message: 'must not define a name twice' },
    ]);
  });
  it('a ranking of the field names needs two fields', () => {
    expect(problems({ fields: [{ name: 'a', type: 'text' }], questions: [{ name: 'r', type: 'ranking' }] }).map((d) => d.path)).to.deep.equal(['questions']);
  });
  it('needs at least one field and one question', () => {
    expect(problems({ fields: [], questions: [] }).map((d) => d.path)).to.have.members(['fields', 'questions']);
  });
});

interface CompiledSchema {
  (data: unknown): boolean;
}
function ajv2020(): { compile(schema: object): CompiledSchema } {
  const require = createRequire(createRequire(import.meta.url).resolve('@seriousme/openapi-schema-validator'));
  const mod = require('ajv/dist/2020') as { default: new (options: object) => { compile(schema: object): CompiledSchema } };
  return new mod.default({ allErrors: true, strict: true, strictTypes: false, strictRequired: false });
}

describe('dataset JSON Schema (GET /datasets/{id}/schema) agrees with the validators', () => {
  it('gives the same verdict as the compiled validators on valid and invalid bodies of every type', () => {
    const definition = definitionOf(EVERY_TYPE);
    const ds = compileDataset(definition);
    const schemas = datasetJsonSchemas(definition);
    const ajv = ajv2020();
    const recordOk = ajv.compile(schemas.record_body);
    const responseOk = ajv.compile(schemas.response_body);
    const fieldVariants: Record<string, unknown>[] = [VALID_FIELDS, { prompt: 'x', score: 1, flag: true }, { prompt: 'x', score: 1 }, { ...VALID_FIELDS, nope: 1 }, { ...VALID_FIELDS, chat: [{ role: 'u' }] }, { ...VALID_FIELDS, score: 'x' }];
    const valueVariants: Record<string, unknown>[] = [
      VALID_VALUES, {}, { rating: 3 }, { ...VALID_VALUES, rating: 9 }, { ...VALID_VALUES, order: ['prompt'] }, { ...VALID_VALUES, order: ['prompt', 'prompt'] },
      { ...VALID_VALUES, topics: [] }, { ...VALID_VALUES, confidence: 2 }, { ...VALID_VALUES, label: 'x' }, { ...VALID_VALUES, extra: 1 }, { note: 'x', confidence: 0, rating: 1, label: 'bad' },
    ];
    let compared = 0;
    for (const status of ['submitted', 'draft', 'discarded'] as const) {
      for (const values of valueVariants) {
        const responseValid = ds.checkResponse(values, status).length === 0 && (status === 'discarded' || Object.keys(values).length > 0);
        expect(responseOk({ feedback_record_id: 'rec_x', response: { status, values } }), `${status} ${JSON.stringify(values)}`).to.equal(responseValid);
        for (const fields of fieldVariants) {
          const valid = responseValid && ds.checkRecord(fields).length === 0;
          expect(recordOk({ record: { feedback_dataset_id: 'ds_every', field_to_value: fields }, response: { status, values } }), `${status} ${JSON.stringify(fields)} ${JSON.stringify(values)}`).to.equal(valid);
          compared++;
        }
      }
    }
    expect(compared).to.equal(3 * valueVariants.length * fieldVariants.length);
    expect(recordOk({ record: { feedback_dataset_id: 'other', field_to_value: VALID_FIELDS }, response: { values: VALID_VALUES } }), 'another dataset id').to.equal(false);
  });
});
