import type { Problems } from './problems.js';
import type { OpenApiDocument } from './json-schema.js';

const METHODS = ['get', 'post', 'put', 'delete', 'patch', 'head', 'options'];

/** Declared once in openapi.yaml's components.headers; the published contract names it on every response. */
const CORS_HEADER = 'Access-Control-Allow-Origin';

/**
 * The published contract (GET /v1/rest, generated/openapi.json): openapi.yaml with the standard OAuth 2.0
 * security requirement derived from each operation's access rule, so SDK generators and docs see it, and
 * the optional CORS header on every response.
 */
export function publishSpec(doc: OpenApiDocument): OpenApiDocument {
  const published = structuredClone(doc);
  for (const pathItem of Object.values<any>(published.paths ?? {})) {
    for (const method of METHODS) {
      const op = pathItem[method];
      if (!op) continue;
      op.security = op['x-public'] === true ? [] : [{ oauth2: [...(op['x-scopes'] ?? [])] }];
      for (const response of Object.values<any>(op.responses ?? {})) declareCorsHeader(response);
    }
  }
  for (const response of Object.values<any>(published.components?.responses ?? {})) declareCorsHeader(response);
  return published;
}

/**
 * Any response of the API, errors included, may carry Access-Control-Allow-Origin (sent only to the origins
 * the server lists in CORS_ORIGINS, src/http/cors.ts). A response that is a `$ref` has it from its component.
 */
function declareCorsHeader(response: any): void {
  if (typeof response !== 'object' || response === null || '$ref' in response) return;
  response.headers = { ...response.headers, [CORS_HEADER]: { $ref: `#/components/headers/${CORS_HEADER}` } };
}

/** The header every published response refers to must be declared, with its description, in openapi.yaml. */
export function checkPublishable(doc: OpenApiDocument, problems: Problems): void {
  if (!doc.components?.headers?.[CORS_HEADER]) {
    problems.add('openapi.yaml', 'components.headers', `must declare ${CORS_HEADER} (the published contract names it on every response)`);
  }
}
