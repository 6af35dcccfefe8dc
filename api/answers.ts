import * as v from 'valibot';

/*
 * The answer bodies of the API's non-write endpoints, as valibot schemas: the routes build their
 * answers with `satisfies` these types, api/openapi.ts documents them. (The write answers, which
 * the client reads too, are in shared/answers.ts.)
 */

/** The 200 body of `POST /feedback-tokens`. */
export const FeedbackTokenAnswer = v.object({
  token: v.pipe(v.string(), v.description('A JWS (HS256): send it as `Authorization: Bearer <token>` to POST /feedback-response, and nowhere else.')),
  token_type: v.literal('Bearer'),
  expires_at: v.pipe(v.string(), v.description('ISO 8601 date-time, whole seconds.')),
  expires_in_seconds: v.pipe(v.number(), v.integer(), v.minValue(1)),
  feedback_record_id: v.string(),
  user_id: v.string(),
  questions: v.pipe(v.nullable(v.array(v.string())), v.description('The `values` keys the token may write (duplicates removed); null = any.')),
});
export type FeedbackTokenAnswer = v.InferOutput<typeof FeedbackTokenAnswer>;

/** The answer of `GET /datasets/{id}/schema`. */
export const DatasetSchemas = v.object({
  dataset_id: v.string(),
  updated_at: v.pipe(v.string(), v.description('The version of the definition described (ISO 8601).')),
  record_body: v.pipe(v.record(v.string(), v.unknown()), v.description('JSON Schema 2020-12 of a `POST /feedback-record` body.')),
  response_body: v.pipe(v.record(v.string(), v.unknown()), v.description('JSON Schema 2020-12 of a `POST /feedback-response` body.')),
});
export type DatasetSchemas = v.InferOutput<typeof DatasetSchemas>;

/** The answer of `DELETE /admin/dead-letters/{id}`. */
export const DeadLetterPurged = v.object({ id: v.string(), purged: v.literal(true) });
export type DeadLetterPurged = v.InferOutput<typeof DeadLetterPurged>;

export const HealthBody = v.object({ status: v.literal('ok') });
export type HealthBody = v.InferOutput<typeof HealthBody>;

/** The answer of `/readyz`, 200 or 503 alike. */
export const ReadinessBody = v.object({
  status: v.picklist(['ready', 'not_ready']),
  redis: v.picklist(['up', 'down']),
  backlog_jobs: v.nullable(v.number()),
  overloaded: v.boolean(),
});
export type ReadinessBody = v.InferOutput<typeof ReadinessBody>;
