import { toJsonSchema, toJsonSchemaDefs, type ConversionConfig, type JsonSchema } from '@valibot/to-json-schema';
import { STATUS_CODES } from 'node:http';
import * as v from 'valibot';
import { ErrorCode, ErrorDetail, type ErrorHeader } from '../shared/errors.js';
import { hasAnyKey, isPlainObject } from '../shared/schemas.js';

/*
 * How a declared operation (api/openapi.ts) becomes OpenAPI 3.1: valibot schemas converted to
 * JSON Schema, error responses derived from the codes table (shared/errors.ts), the parameters,
 * headers and security its access level implies.
 */

/** Headers a response may carry, each described once in `components.headers`. */
type ResponseHeader = ErrorHeader | 'X-Request-Id' | 'Idempotent-Replayed';

/** Who may call an operation; it decides the security, the tags and the codes of authentication. */
type Access = 'public' | 'key' | 'read' | 'admin';

interface Answer {
  readonly description: string;
  /** The JSON body; a schema named in the components becomes a `$ref`. */
  readonly json?: v.GenericSchema;
  /** A body of another media type, documented as a string. */
  readonly media?: string;
  /** Headers besides `X-Request-Id`, which every answer carries. */
  readonly headers?: readonly ResponseHeader[];
}

/** One operation, declared: the rest of its OpenAPI entry is derived from these fields. */
export interface OperationSpec {
  readonly operationId: string;
  readonly summary: string;
  readonly description?: string;
  readonly access: Access;
  /** Also HTTP Basic (the dashboard, for browsers). */
  readonly basicAuth?: true;
  /** Also a browser feedback token (`feedbackToken` scheme), which adds the codes of its checks. */
  readonly feedbackToken?: true;
  /** Instead of the tags its access implies. */
  readonly tags?: readonly string[];
  /** Path parameters: name → description, or description and the schema the route checks it with (else any string). */
  readonly path?: Readonly<Record<string, string | { readonly description: string; readonly schema: v.GenericSchema }>>;
  /** Query parameters: one per entry of the object schema the route parses the query with. */
  readonly query?: { readonly entries: v.ObjectEntries };
  /** Header parameters besides `X-Request-Id`, named in `components.parameters`. */
  readonly headers?: readonly string[];
  readonly body?: { readonly schema: v.GenericSchema; readonly description?: string };
  readonly answers: Readonly<Record<number, Answer>>;
  /** Error codes beyond those of every request and of its access. */
  readonly codes?: readonly ErrorCode[];
}

export type Paths = Readonly<Record<string, Partial<Record<'get' | 'post' | 'put' | 'delete', OperationSpec>>>>;

/** Codes any request can get, whatever its path: Node's parser refusals and bugs. */
const TRANSPORT_CODES = ['bad_request', 'request_timeout', 'headers_too_large', 'internal_error'] as const satisfies readonly ErrorCode[];
/** Codes of authentication with an API key (api/middleware/auth.ts, api/middleware/admin.ts): 503 while the stored keys are not loaded yet. */
const KEY_CODES = ['unauthorized', 'invalid_api_key', 'forbidden', 'store_unavailable'] as const satisfies readonly ErrorCode[];
const ACCESS_CODES: Readonly<Record<Access, readonly ErrorCode[]>> = {
  public: TRANSPORT_CODES,
  key: [...TRANSPORT_CODES, ...KEY_CODES],
  // The read side queries MongoDB on the request's path (the writes never do); store_unavailable is among KEY_CODES.
  read: [...TRANSPORT_CODES, ...KEY_CODES],
  admin: [...TRANSPORT_CODES, ...KEY_CODES],
};
/** Codes of the checks of a feedback token (api/middleware/auth.ts, api/write-kinds.ts). */
const FEEDBACK_TOKEN_CODES = ['token_expired', 'invalid_token', 'token_out_of_scope'] as const satisfies readonly ErrorCode[];
/** Codes of no operation in particular: any unknown path, any known path with the wrong method. */
const ANY_PATH_CODES = ['not_found', 'method_not_allowed'] as const satisfies readonly ErrorCode[];
const ERROR_CODES = Object.keys(ErrorCode) as ErrorCode[];

function noteOf(message: unknown): string | undefined {
  return typeof message === 'string' ? message : undefined;
}

function withNote(schema: JsonSchema, note: string | undefined): JsonSchema {
  if (note === undefined) return schema;
  const also = `Also checked by the API: ${note}.`;
  return { ...schema, description: schema.description === undefined ? also : `${schema.description} ${also}` };
}

/**
 * How the valibot schemas become JSON Schema 2020-12 (the dialect of OpenAPI 3.1). Anything the
 * converter does not know and that is not handled below throws (errorMode 'throw'), so a new
 * construct in the schemas fails the OpenAPI test instead of silently documenting less than the
 * API checks.
 *
 * `typeMode: 'output'` starts each pipe at its last schema: closedObject() is
 * `pipe(custom(isPlainObject), rawCheck, objectWithRest(entries, never), transform)`, and the
 * object schema is the part JSON Schema can express.
 */
const CONVERSION: ConversionConfig = {
  target: 'draft-2020-12',
  typeMode: 'output',
  errorMode: 'throw',
  overrideRef: ({ referenceId }) => `#/components/schemas/${referenceId}`,
  overrideSchema({ valibotSchema, jsonSchema }) {
    // jsonObject(): a plain-object check; its key and depth rules travel in its description.
    if (valibotSchema.type === 'custom' && (valibotSchema as { check?: unknown }).check === isPlainObject) {
      return { ...jsonSchema, type: 'object' };
    }
    // closedObject(): `additionalProperties: false` says what `{not: {}}` says, more readably.
    if (valibotSchema.type === 'object_with_rest' && (valibotSchema as { rest?: { type?: unknown } }).rest?.type === 'never') {
      return { ...jsonSchema, additionalProperties: false };
    }
    return undefined;
  },
  overrideAction({ valibotAction, jsonSchema }) {
    const action = valibotAction as { type: string; requirement?: unknown; message?: unknown };
    switch (action.type) {
      case 'check':
        if (action.requirement === hasAnyKey) return { ...jsonSchema, minProperties: 1 };
        // e.g. "must not contain unpaired surrogates": not expressible, so stated in words.
        return withNote(jsonSchema, noteOf(action.message));
      case 'partial_check':
        // "values must have at least one key unless status is discarded".
        return withNote(jsonSchema, noteOf(action.message));
      case 'raw_check':
        // jsonObject()'s key/depth walk (described by its v.description) and closedObject()'s
        // report of __proto__-like keys (already excluded by additionalProperties: false).
        return jsonSchema;
      case 'transform':
        // closedObject()'s type-level cast, or a query string turned into the schema after it.
        return jsonSchema;
      default:
        return undefined;
    }
  },
};

/** The error shape of the contract, with `code` limited to `codes`. */
function errorBody(codes: readonly ErrorCode[]) {
  return v.object({
    error: v.object({
      code: v.picklist(codes),
      message: v.pipe(v.string(), v.description('For humans; may change. Match on `code`.')),
      details: v.exactOptional(v.pipe(v.array(ErrorDetail), v.description('With `validation_failed` only: every problem, with its JSON path.'))),
    }),
  });
}

const headerRefs = (names: readonly ResponseHeader[]) => Object.fromEntries(['X-Request-Id', ...names].map((name) => [name, { $ref: `#/components/headers/${name}` }]));
const parameterRef = (name: string) => ({ $ref: `#/components/parameters/${name}` });

/** Converts the schemas of one document; `components` are referred to by name wherever they appear. */
function createConverter(components: Readonly<Record<string, v.GenericSchema>>) {
  const config: ConversionConfig = { ...CONVERSION, definitions: components };

  function jsonSchemaOf(schema: v.GenericSchema): JsonSchema {
    // `$schema` is implied by OpenAPI 3.1's dialect; `$defs` are the components, already there.
    const converted = toJsonSchema(schema, config);
    delete converted.$schema;
    delete converted.$defs;
    return converted;
  }

  /** One response object per status, `code` limited to the given codes of that status. */
  function errorResponses(codes: readonly ErrorCode[]): Record<string, unknown> {
    const byStatus = new Map<number, ErrorCode[]>();
    for (const code of codes) {
      const status = ErrorCode[code].status;
      byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
    }
    const out: Record<string, unknown> = {};
    for (const [status, group] of [...byStatus].sort(([a], [b]) => a - b)) {
      const headers = group.flatMap((code) => (ErrorCode[code] as { headers?: readonly ErrorHeader[] }).headers ?? []);
      out[String(status)] = {
        description: `${STATUS_CODES[status] ?? 'Error'}: ${group.map((code) => `\`${code}\` (${ErrorCode[code].description})`).join('; ')}`,
        headers: headerRefs([...new Set(headers)]),
        content: { 'application/json': { schema: jsonSchemaOf(errorBody(group)) } },
      };
    }
    return out;
  }

  function answer(spec: Answer) {
    const content =
      spec.json !== undefined ? { 'application/json': { schema: jsonSchemaOf(spec.json) } }
      : spec.media !== undefined ? { [spec.media]: { schema: { type: 'string' } } }
      : undefined;
    return { description: spec.description, headers: headerRefs(spec.headers ?? []), ...(content === undefined ? {} : { content }) };
  }

  function queryParameters(query: { readonly entries: v.ObjectEntries }) {
    return Object.entries(query.entries).map(([name, entry]) => {
      // OpenAPI puts a parameter's description beside its schema.
      const { description, ...schema } = jsonSchemaOf(entry);
      const required = !['exact_optional', 'optional', 'nullish'].includes(entry.type);
      return { name, in: 'query', required, ...(description === undefined ? {} : { description }), schema };
    });
  }

  function operation(spec: OperationSpec) {
    const pathParameters = Object.entries(spec.path ?? {}).map(([name, param]) =>
      typeof param === 'string' ? { name, in: 'path', required: true, description: param, schema: { type: 'string' } } : { name, in: 'path', required: true, description: param.description, schema: jsonSchemaOf(param.schema) },
    );
    const tags = spec.tags ?? (spec.access === 'admin' || spec.access === 'read' ? [spec.access] : undefined);
    const schemes = spec.access === 'public' ? [] : ['bearerAuth', ...(spec.basicAuth ? ['basicAuth'] : []), ...(spec.feedbackToken ? ['feedbackToken'] : [])];
    const answers = Object.fromEntries(Object.entries(spec.answers).map(([status, a]) => [status, answer(a)]));
    return {
      operationId: spec.operationId,
      summary: spec.summary,
      ...(spec.description === undefined ? {} : { description: spec.description }),
      ...(tags === undefined ? {} : { tags }),
      security: schemes.map((scheme) => ({ [scheme]: [] })),
      parameters: [...['X-Request-Id', ...(spec.headers ?? [])].map(parameterRef), ...pathParameters, ...(spec.query === undefined ? [] : queryParameters(spec.query))],
      ...(spec.body === undefined ? {} : { requestBody: { required: true, ...(spec.body.description === undefined ? {} : { description: spec.body.description }), content: { 'application/json': { schema: jsonSchemaOf(spec.body.schema) } } } }),
      responses: { ...answers, ...errorResponses([...ACCESS_CODES[spec.access], ...(spec.codes ?? []), ...(spec.feedbackToken ? FEEDBACK_TOKEN_CODES : [])]) },
    };
  }

  /** The components themselves, each converted whole (not as a reference to itself). */
  const componentSchemas = () => toJsonSchemaDefs(components, CONVERSION);

  return { jsonSchemaOf, errorResponses, operation, componentSchemas };
}

/** What a document declares; everything else in it is derived. */
interface DocumentSpec {
  readonly info: Readonly<Record<string, unknown>>;
  readonly paths: Paths;
  /** Schemas shown under `components.schemas` and referred to by name. */
  readonly schemas: Readonly<Record<string, v.GenericSchema>>;
  /** The rest of `components` (security schemes, parameters, headers), as OpenAPI JSON. */
  readonly components: Readonly<Record<string, unknown>>;
}

/** An OpenAPI 3.1 document, as plain JSON. */
export type OpenApiDocument = Record<string, unknown>;

export function buildOpenApiDocument(spec: DocumentSpec): OpenApiDocument {
  const schemas = { ...spec.schemas, Error: errorBody(ERROR_CODES) };
  const convert = createConverter(schemas);
  const paths = Object.fromEntries(
    Object.entries(spec.paths).map(([path, methods]) => [path, Object.fromEntries(Object.entries(methods).map(([method, op]) => [method, convert.operation(op)]))]),
  );
  const perStatus = Object.entries(convert.errorResponses(ERROR_CODES)).map(([status, response]) => [`Error${status}`, response]);
  const anyPath = convert.errorResponses(ANY_PATH_CODES);
  return {
    openapi: '3.1.0',
    info: spec.info,
    paths,
    components: {
      ...spec.components,
      schemas: {
        ...convert.componentSchemas(),
        ErrorCode: {
          type: 'string',
          description: 'Every `error.code` the API can answer with.',
          oneOf: ERROR_CODES.map((code) => ({ const: code, description: `HTTP ${ErrorCode[code].status}. ${ErrorCode[code].description}` })),
        },
      },
      responses: { ...Object.fromEntries(perStatus), NotFound: anyPath['404'], MethodNotAllowed: anyPath['405'] },
    },
  };
}
