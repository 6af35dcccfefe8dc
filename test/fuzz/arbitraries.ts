import fc from 'fast-check';
import { STATUSES, keyIsValid } from './oracle.js';

/**
 * Generators of request bodies: valid ones (by the contract), and valid ones with one mutation
 * that usually makes them invalid. Whether a body is valid is decided by the oracle, not here.
 * Arrays directly inside arrays are left out of valid bodies: the API accepts them (any JSON
 * value) but FerretDB cannot store them, which the poison scenario covers.
 */

/** Short text of any Unicode (well-formed), as JSON carries it. */
export const text = (maxLength: number) => fc.string({ unit: 'grapheme', maxLength });
const text1 = (maxLength: number) => fc.string({ unit: 'grapheme', minLength: 1, maxLength });

const goodKey = fc.oneof(
  { weight: 8, arbitrary: text1(12).filter(keyIsValid) },
  { weight: 2, arbitrary: fc.constantFrom('a b', 'ünïcødé', '日本語', 'x-y_z', 'k'.repeat(200), '0', ' ', 'emoji👍🏽', 'a$', 'tab\tkey', 'NUL-free "quote"', 'toString', 'valueOf', 'hasOwnProperty') },
);

const badKey = fc.constantFrom('', '$where', '$', 'a.b', '.', 'x\u0000y', '__proto__', 'constructor', 'prototype', 'k'.repeat(201), '$.x');

const leaf = fc.oneof(
  text(40),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.boolean(),
  fc.constant(null),
  fc.constantFrom('NUL \u0000 inside', '', ' ', '\\', '"', '</script>', '\u2028\u2029', '\uFFFD', '🏳️‍🌈'),
);

const tree = fc.letrec((tie) => ({
  value: fc.oneof({ maxDepth: 4, depthIdentifier: 'tree' }, leaf, leaf, tie('array'), tie('object')),
  array: fc.array(fc.oneof({ maxDepth: 4, depthIdentifier: 'tree' }, leaf, tie('object')), { maxLength: 4 }),
  object: fc.dictionary(goodKey, tie('value'), { maxKeys: 5, noNullPrototype: true }),
}));

const jsonObject = tree.object as fc.Arbitrary<Record<string, unknown>>;
const nonEmptyObject = fc.tuple(goodKey, tree.value, jsonObject).map(([k, v, o]) => ({ ...o, [k]: v }) as Record<string, unknown>);
const status = fc.constantFrom(...STATUSES);

export const validRecordBody = fc
  .record(
    {
      record: fc.record(
        {
          feedback_dataset_id: fc.oneof({ weight: 9, arbitrary: text1(20) }, { weight: 1, arbitrary: fc.constant('d'.repeat(256)) }),
          field_to_value: nonEmptyObject,
          external_id: fc.oneof({ weight: 9, arbitrary: text1(30) }, { weight: 1, arbitrary: fc.constant('e'.repeat(1024)) }),
          metadata: jsonObject,
        },
        { requiredKeys: ['feedback_dataset_id', 'field_to_value'] },
      ),
      response: fc.record({ values: jsonObject, status, user_id: fc.oneof(text1(20), fc.constant('u'.repeat(256))) }, { requiredKeys: ['values'] }),
    },
    { noNullPrototype: true },
  )
  .map((b) => {
    const r = b.response as { values: Record<string, unknown>; status?: string };
    if (Object.keys(r.values).length === 0 && r.status !== 'discarded') r.values = { filled: true };
    return b as Record<string, any>;
  });

export const validResponseBody = (recordIds: readonly string[]) =>
  fc.record({
    feedback_record_id: fc.constantFrom(...recordIds),
    response: fc
      .record({ status, values: jsonObject, user_id: fc.oneof(text1(20), fc.constant('u'.repeat(256))) }, { requiredKeys: ['status', 'values'] })
      .map((r) => {
        if (Object.keys(r.values).length === 0 && r.status !== 'discarded') r.values = { filled: true };
        return r;
      }),
  }) as fc.Arbitrary<Record<string, any>>;

/** A value of some JSON type, usually the wrong one for the field it replaces. */
export const anyJsonValue = fc.oneof(fc.integer(), fc.boolean(), fc.constant(null), text(6), fc.array(fc.integer(), { maxLength: 2 }), fc.constant({}), fc.constant({ x: 1 }), fc.constantFrom(...STATUSES), fc.double());

type Mutation =
  | { kind: 'none' }
  | { kind: 'delete'; path: string }
  | { kind: 'replace'; path: string; value: unknown }
  | { kind: 'unknown'; path: string; key: string; value: unknown }
  | { kind: 'badKey'; path: string; key: string; depth: number }
  | { kind: 'deep'; path: string; levels: number }
  | { kind: 'length'; path: string; size: number }
  | { kind: 'emptyValues'; status: string | undefined }
  | { kind: 'recordId'; variant: 'flip' | 'random' | 'truncate' | 'pad'; text: string };

const RECORD_FIELDS = ['record', 'response', 'record.feedback_dataset_id', 'record.field_to_value', 'record.external_id', 'record.metadata', 'response.values', 'response.status', 'response.user_id'];
const RESPONSE_FIELDS = ['feedback_record_id', 'response', 'response.values', 'response.status', 'response.user_id'];
const FREE_FORM_RECORD = ['record.field_to_value', 'record.metadata', 'response.values'];

function mutations(fields: readonly string[], required: readonly string[], freeForm: readonly string[], lengths: readonly string[], containers: readonly string[]): fc.Arbitrary<Mutation> {
  return fc.oneof(
    { weight: 2, arbitrary: fc.constant<Mutation>({ kind: 'none' }) },
    fc.record({ kind: fc.constant('delete' as const), path: fc.constantFrom(...required) }),
    { weight: 3, arbitrary: fc.record({ kind: fc.constant('replace' as const), path: fc.constantFrom(...fields), value: anyJsonValue }) },
    fc.record({ kind: fc.constant('unknown' as const), path: fc.constantFrom(...containers), key: fc.oneof(text1(10), fc.constantFrom('__proto__', 'constructor', 'status', 'seq', '_id')), value: anyJsonValue }),
    { weight: 3, arbitrary: fc.record({ kind: fc.constant('badKey' as const), path: fc.constantFrom(...freeForm), key: badKey, depth: fc.integer({ min: 0, max: 3 }) }) },
    fc.record({ kind: fc.constant('deep' as const), path: fc.constantFrom(...freeForm), levels: fc.oneof(fc.integer({ min: 27, max: 34 }), fc.integer({ min: 35, max: 400 })) }),
    fc.record({ kind: fc.constant('length' as const), path: fc.constantFrom(...lengths), size: fc.constantFrom(0, 200, 201, 256, 257, 1024, 1025, 5000) }),
    fc.record({ kind: fc.constant('emptyValues' as const), status: fc.constantFrom(undefined, 'draft', 'submitted', 'discarded') }),
  );
}

export const recordMutation = mutations(RECORD_FIELDS, ['record', 'response', 'record.feedback_dataset_id', 'record.field_to_value', 'response.values'], FREE_FORM_RECORD, ['record.feedback_dataset_id', 'record.external_id', 'response.user_id'], ['', 'record', 'response']);

export const responseMutation = fc.oneof(
  { weight: 6, arbitrary: mutations(RESPONSE_FIELDS, ['feedback_record_id', 'response', 'response.values', 'response.status'], ['response.values'], ['feedback_record_id', 'response.user_id'], ['', 'response']) },
  fc.record({ kind: fc.constant('recordId' as const), variant: fc.constantFrom('flip', 'random', 'truncate', 'pad'), text: text1(40) }),
);

function defineKey(o: Record<string, unknown>, key: string, value: unknown): void {
  // Plain assignment of "__proto__" would set the prototype instead of a key.
  Object.defineProperty(o, key, { value, enumerable: true, writable: true, configurable: true });
}

function parentOf(body: Record<string, any>, path: string): [Record<string, any> | undefined, string] {
  const parts = path.split('.');
  const last = parts.pop()!;
  let o: any = body;
  for (const p of parts) {
    if (typeof o !== 'object' || o === null) return [undefined, last];
    o = o[p];
  }
  return [typeof o === 'object' && o !== null && !Array.isArray(o) ? o : undefined, last];
}

/** The object at `path`, made an empty object when something else is there; undefined when its parent is missing. */
function objectAt(body: Record<string, any>, path: string): Record<string, any> | undefined {
  const [existing] = parentOf(body, `${path}.x`);
  if (existing !== undefined) return existing;
  const [parent, key] = parentOf(body, path);
  if (parent === undefined) return undefined;
  const made: Record<string, any> = {};
  parent[key] = made;
  return made;
}

function nest(levels: number): unknown {
  let v: unknown = 'bottom';
  for (let i = 0; i < levels; i++) v = i % 3 === 2 ? [v] : { n: v };
  return v;
}

/** Applies `m` to a deep copy of `body`. */
export function applyMutation(body: Record<string, any>, m: Mutation): Record<string, any> {
  const b = structuredClone(body);
  switch (m.kind) {
    case 'none':
      break;
    case 'delete': {
      const [parent, key] = parentOf(b, m.path);
      if (parent !== undefined) delete parent[key];
      break;
    }
    case 'replace': {
      const [parent, key] = parentOf(b, m.path);
      if (parent !== undefined) defineKey(parent, key, m.value);
      break;
    }
    case 'unknown': {
      const target = m.path === '' ? b : parentOf(b, `${m.path}.x`)[0];
      if (target !== undefined) defineKey(target, m.key, m.value);
      break;
    }
    case 'badKey': {
      let target = objectAt(b, m.path);
      if (target === undefined) break;
      for (let i = 0; i < m.depth; i++) {
        const child: Record<string, unknown> = {};
        target[`level${i}`] = child;
        target = child;
      }
      defineKey(target, m.key, 'v');
      break;
    }
    case 'deep': {
      const target = objectAt(b, m.path);
      if (target !== undefined) target['deep'] = nest(m.levels);
      break;
    }
    case 'length': {
      const [parent, key] = parentOf(b, m.path);
      if (parent !== undefined) parent[key] = 'L'.repeat(m.size);
      break;
    }
    case 'emptyValues': {
      const r = b['response'] as Record<string, unknown> | undefined;
      if (typeof r !== 'object' || r === null) break;
      r['values'] = {};
      if (m.status === undefined) delete r['status'];
      else r['status'] = m.status;
      break;
    }
    case 'recordId': {
      const id = String(b['feedback_record_id']);
      if (m.variant === 'flip') {
        const i = 4 + (m.text.length % Math.max(1, id.length - 4));
        b['feedback_record_id'] = id.slice(0, i) + (id[i] === 'A' ? 'B' : 'A') + id.slice(i + 1);
      } else if (m.variant === 'random') b['feedback_record_id'] = m.text;
      else if (m.variant === 'truncate') b['feedback_record_id'] = id.slice(0, -1);
      else b['feedback_record_id'] = `${id}=`;
      break;
    }
  }
  return b;
}
