import type { OpenApiDocument } from './json-schema.js';

const METHODS = ['get', 'post', 'put', 'delete', 'patch', 'head', 'options'];

/**
 * The published contract (GET /v1/rest, generated/openapi.json): openapi.yaml with the standard OAuth 2.0
 * security requirement derived from each operation's access rule, so SDK generators and docs see it.
 */
export function publishSpec(doc: OpenApiDocument): OpenApiDocument {
  const published = structuredClone(doc);
  for (const pathItem of Object.values<any>(published.paths ?? {})) {
    for (const method of METHODS) {
      const op = pathItem[method];
      if (!op) continue;
      op.security = op['x-public'] === true ? [] : [{ oauth2: [...(op['x-scopes'] ?? [])] }];
    }
  }
  return published;
}
