import { expect } from 'chai';
import * as v from 'valibot';
import { FeedbackRecordBody, FeedbackResponseBody, keyNameProblem, KEY_NAME_MAX_LENGTH } from '../../shared/schemas.js';
import { Write } from '../../shared/writes.js';
import { formatPath, toDetails } from '../../shared/issue-details.js';
import { JOB_PAYLOAD_VERSION, JobEnvelope } from '../../shared/job-payload.js';

type PathItem = v.IssuePathItem;

/** Minimal valibot path items for `formatPath`. */
function pathOf(...keys: (string | number)[]): PathItem[] {
  return keys.map((key) =>
    typeof key === 'number'
      ? ({ type: 'array', origin: 'value', input: [], key, value: null } as PathItem)
      : ({ type: 'object', origin: 'value', input: {}, key, value: null } as PathItem),
  );
}

describe('wire schemas (shared/schemas.ts)', () => {
  describe('keyNameProblem', () => {
    const bad: readonly [string, string][] = [
      ['empty', ''],
      ['201 characters', 'k'.repeat(KEY_NAME_MAX_LENGTH + 1)],
      ['starting with $', '$set'],
      ['only $', '$'],
      ['containing .', 'a.b'],
      ['ending with .', 'a.'],
      ['containing NUL', 'a\0b'],
      ['__proto__', '__proto__'],
      ['constructor', 'constructor'],
      ['prototype', 'prototype'],
    ];
    for (const [name, key] of bad) {
      it(`refuses a key ${name}`, () => {
        expect(keyNameProblem(key)).to.be.a('string').with.length.greaterThan(0);
      });
    }

    const good: readonly [string, string][] = [
      ['of one character', 'a'],
      ['of 200 characters', 'k'.repeat(KEY_NAME_MAX_LENGTH)],
      ['with $ inside', 'price$'],
      ['with spaces', 'a b'],
      ['in another script', 'ключ'],
      ['with an emoji', '🙂'],
      ['Constructor (case differs)', 'Constructor'],
      ['_proto_', '_proto_'],
    ];
    for (const [name, key] of good) {
      it(`allows a key ${name}`, () => {
        expect(keyNameProblem(key)).to.equal(undefined);
      });
    }

    it('counts the 200 limit in UTF-16 code units the same way for every key', () => {
      expect(keyNameProblem('é'.repeat(200))).to.equal(undefined);
      expect(keyNameProblem('é'.repeat(201))).to.be.a('string');
    });
  });

  describe('formatPath', () => {
    it('is "body" for the body itself', () => {
      expect(formatPath(undefined)).to.equal('body');
      expect(formatPath([])).to.equal('body');
    });

    it('dots identifier keys and brackets indexes', () => {
      expect(formatPath(pathOf('response', 'status'))).to.equal('response.status');
      expect(formatPath(pathOf('response', 'values', 'ranking', 0, 'x-y'))).to.equal('response.values.ranking[0].x-y');
    });

    it('JSON-quotes keys that are not identifiers', () => {
      expect(formatPath(pathOf('record', 'field_to_value', 'a.b', 0))).to.equal('record.field_to_value["a.b"][0]');
      expect(formatPath(pathOf('record', 'field_to_value', ''))).to.equal('record.field_to_value[""]');
      expect(formatPath(pathOf('values', '$x'))).to.equal('values["$x"]');
      expect(formatPath(pathOf('values', 'a"b'))).to.equal('values["a\\"b"]');
      expect(formatPath(pathOf('values', 'a\0b'))).to.equal('values["a\\u0000b"]');
      expect(formatPath(pathOf('values', '1abc'))).to.equal('values["1abc"]');
    });

    it('quotes a first key that is not an identifier', () => {
      expect(formatPath(pathOf('0'))).to.equal('["0"]');
    });
  });

  describe('request bodies', () => {
    it('FeedbackRecordBody reports every problem with its path', () => {
      const result = v.safeParse(FeedbackRecordBody, { record: { feedback_dataset_id: '', field_to_value: { $bad: 1 } }, response: { values: {}, status: 'x' } }, { abortEarly: false });
      expect(result.success).to.equal(false);
      const paths = toDetails(result.issues ?? []).map((d) => d.path);
      expect(paths).to.include.members(['record.feedback_dataset_id', 'record.field_to_value["$bad"]', 'response.status']);
    });

    /** Paths of the problems FeedbackRecordBody finds in `body`, or [] when it passes. */
    function problems(body: unknown): string[] {
      const result = v.safeParse(FeedbackRecordBody, body, { abortEarly: false });
      return result.success ? [] : toDetails(result.issues).map((d) => `${d.path}: ${d.message}`);
    }
    const ok = (over: Record<string, unknown> = {}) => ({ record: { feedback_dataset_id: 'ds', field_to_value: { q: 'x', ...over } }, response: { values: { a: 1 } } });

    it('refuses numbers JSON.parse turned into Infinity (1e400), at any depth and in lists', () => {
      expect(problems(JSON.parse('{"record":{"feedback_dataset_id":"ds","field_to_value":{"a":1e400,"b":[1,-1e400],"c":{"d":1e308}}},"response":{"values":{"s":1}}}'))).to.deep.equal([
        'record.field_to_value.a: number must be within the range of a double',
        'record.field_to_value.b[1]: number must be within the range of a double',
      ]);
      expect(problems(ok({ big: 1.7976931348623157e308 }))).to.deep.equal([]);
    });

    it('refuses unpaired surrogates in values, keys, list items and id fields; accepts pairs', () => {
      const body = JSON.parse('{"record":{"feedback_dataset_id":"d\\ud800","field_to_value":{"v":"x\\udc00","k\\udbff":1,"l":["\\ude00y"]}},"response":{"values":{"s":1}}}');
      const found = problems(body);
      expect(found).to.have.length(4);
      expect(found.map((p) => p.split(':')[0])).to.have.members(['record.feedback_dataset_id', 'record.field_to_value.v', 'record.field_to_value["k\\udbff"]', 'record.field_to_value.l[0]']);
      expect(problems(ok({ emoji: 'a\u{1F642}b', 'pair\u{1F642}': '\ud83d\ude42' }))).to.deep.equal([]);
    });
  });

  describe('bodies with a key named like an Object.prototype member and missing fields (a 500 the fuzz suite found)', () => {
    const cases: readonly [string, unknown][] = [
      ['a response with "prototype" and no values', { response: { prototype: false } }],
      ['a response with "constructor" and no status', { feedback_record_id: 'rec_x', response: { constructor: 1, values: {} } }],
      ['a record body whose response has "prototype"', { record: { feedback_dataset_id: 'ds', field_to_value: { q: 1 } }, response: { prototype: false } }],
      ['a record that is false, a response with "__proto__"', JSON.parse('{"record":false,"response":{"__proto__":false}}')],
    ];
    for (const [name, body] of cases) {
      it(`refuses ${name} with issues, without throwing`, () => {
        for (const schema of [FeedbackRecordBody, FeedbackResponseBody]) {
          const result = v.safeParse(schema, body, { abortEarly: false });
          expect(result.success).to.equal(false);
          expect(toDetails(result.issues ?? []).length).to.be.greaterThan(0);
        }
      });
    }
  });

  describe('the queue contract', () => {
    const recordWrite = () => ({
      kind: 'record',
      request_id: 'req-1',
      accepted_at: 1_700_000_000_000,
      api_key: 'tester',
      record_id: 'rec_x',
      response_id: 'rsp_y',
      record: { feedback_dataset_id: 'ds', field_to_value: { prompt: 'p' } },
      response: { status: 'submitted', values: { helpful: 1 }, user_id: 'u' },
    });
    const responseWrite = () => ({
      kind: 'response',
      request_id: 'req-2',
      accepted_at: 1_700_000_000_001,
      api_key: 'tester',
      record_id: 'rec_x',
      response_id: 'rsp_z',
      response: { status: 'discarded', values: {}, user_id: 'u' },
      seq: 42,
    });

    it('Write accepts well-formed record and response writes', () => {
      expect(v.safeParse(Write, recordWrite()).success).to.equal(true);
      expect(v.safeParse(Write, responseWrite()).success).to.equal(true);
    });

    const malformed: readonly [string, () => unknown][] = [
      ['not an object', () => 'write'],
      ['null', () => null],
      ['no kind', () => ({ ...recordWrite(), kind: undefined })],
      ['an unknown kind', () => ({ ...recordWrite(), kind: 'annotation' })],
      ['an unknown property', () => ({ ...recordWrite(), extra: 1 })],
      ['a record write without its record', () => ({ ...recordWrite(), record: undefined })],
      ['a response write carrying a record', () => ({ ...responseWrite(), record: recordWrite().record })],
      ['an empty record_id', () => ({ ...recordWrite(), record_id: '' })],
      ['an empty response_id', () => ({ ...recordWrite(), response_id: '' })],
      ['accepted_at as a string', () => ({ ...recordWrite(), accepted_at: '2024-01-01' })],
      ['a negative accepted_at', () => ({ ...recordWrite(), accepted_at: -1 })],
      ['a fractional accepted_at', () => ({ ...recordWrite(), accepted_at: 1.5 })],
      ['an empty api_key', () => ({ ...recordWrite(), api_key: '' })],
      ['a request_id over 200 characters', () => ({ ...recordWrite(), request_id: 'r'.repeat(201) })],
      ['a negative seq', () => ({ ...responseWrite(), seq: -1 })],
      ['a fractional seq', () => ({ ...responseWrite(), seq: 0.5 })],
      ['a response without user_id', () => ({ ...responseWrite(), response: { status: 'draft', values: { a: 1 } } })],
      ['a response without status', () => ({ ...responseWrite(), response: { values: { a: 1 }, user_id: 'u' } })],
      ['a bad status', () => ({ ...responseWrite(), response: { status: 'done', values: { a: 1 }, user_id: 'u' } })],
      ['empty values with status submitted', () => ({ ...responseWrite(), response: { status: 'submitted', values: {}, user_id: 'u' } })],
      ['values with a $ key', () => ({ ...responseWrite(), response: { status: 'draft', values: { $set: 1 }, user_id: 'u' } })],
      ['field_to_value with a nested . key', () => ({ ...recordWrite(), record: { feedback_dataset_id: 'ds', field_to_value: { a: { 'b.c': 1 } } } })],
      ['an empty field_to_value', () => ({ ...recordWrite(), record: { feedback_dataset_id: 'ds', field_to_value: {} } })],
      ['a record with an unknown property', () => ({ ...recordWrite(), record: { ...recordWrite().record, extra: 1 } })],
    ];
    for (const [name, make] of malformed) {
      it(`Write rejects ${name}`, () => {
        expect(v.safeParse(Write, make()).success).to.equal(false);
      });
    }

    it('JobEnvelope accepts the current version with at least one write', () => {
      expect(v.safeParse(JobEnvelope, { v: JOB_PAYLOAD_VERSION, writes: [recordWrite()] }).success).to.equal(true);
    });

    const badEnvelopes: readonly [string, unknown][] = [
      ['another version', { v: JOB_PAYLOAD_VERSION + 1, writes: [{}] }],
      ['no version', { writes: [{}] }],
      ['the version as a string', { v: String(JOB_PAYLOAD_VERSION), writes: [{}] }],
      ['no writes', { v: JOB_PAYLOAD_VERSION, writes: [] }],
      ['writes not a list', { v: JOB_PAYLOAD_VERSION, writes: { 0: {} } }],
      ['an unknown property', { v: JOB_PAYLOAD_VERSION, writes: [{}], extra: true }],
      ['not an object', 'job'],
      ['null', null],
    ];
    for (const [name, payload] of badEnvelopes) {
      it(`JobEnvelope rejects ${name}`, () => {
        expect(v.safeParse(JobEnvelope, payload).success).to.equal(false);
      });
    }
  });
});
