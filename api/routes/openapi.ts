import type { ApiContext } from '../state.js';
import type { OpenApiDocument } from '../openapi-build.js';

/** Serves the document serialised once: it cannot change while the process runs. */
export function getOpenApi(document: OpenApiDocument) {
  const json = JSON.stringify(document);
  return (ctx: ApiContext): void => {
    ctx.type = 'application/json';
    ctx.body = json;
  };
}
