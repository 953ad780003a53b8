import type { Problems } from './problems.js';
import type { OpenApiDocument } from './json-schema.js';

const METHODS = ['get', 'post', 'put', 'delete', 'patch', 'head', 'options'];

/** Declared once in openapi.yaml's components.headers; the published contract names it on every response. */
const CORS_HEADER = 'Access-Control-Allow-Origin';

/**
 * The published contract (GET /v1/rest, generated/openapi.json): openapi.yaml with the standard OAuth 2.0
 * security requirement derived from each operation's access rule, so SDK generators and docs see it, the
 * optional CORS header on every response, and on every response of a deprecated operation the headers the
 * server sends with it (src/rest/representation.ts).
 */
export function publishSpec(doc: OpenApiDocument): OpenApiDocument {
  const published = structuredClone(doc);
  for (const pathItem of Object.values<any>(published.paths ?? {})) {
    for (const method of METHODS) {
      const op = pathItem[method];
      if (!op) continue;
      op.security = op['x-public'] === true ? [] : [{ oauth2: [...(op['x-scopes'] ?? [])] }];
      for (const response of Object.values<any>(op.responses ?? {})) declareCorsHeader(response);
      if (op.deprecated === true) declareDeprecationHeaders(published, op);
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

/**
 * A deprecated operation answers every request with `Deprecation` (RFC 9745) and `Link` (rel="deprecation"),
 * and `Sunset` (RFC 8594) when it has a date to stop: each of its responses declares them, so that a client
 * generated from the contract can read them. A response shared through `$ref` is copied into the operation
 * first, since the headers are the operation's, not the component's.
 */
function declareDeprecationHeaders(doc: OpenApiDocument, op: any): void {
  const headers: Record<string, unknown> = {
    Deprecation: {
      description: 'RFC 9745: this operation is deprecated; `@` and the Unix time from which it was.',
      required: true,
      schema: { type: 'string', pattern: '^@[0-9]+$' },
    },
    Link: {
      description: 'RFC 9745: where the deprecation is explained (`rel="deprecation"`), the replacement\'s documentation when there is one.',
      required: true,
      schema: { type: 'string' },
    },
  };
  if (op['x-sunset'] !== undefined) {
    headers.Sunset = { description: 'RFC 8594: the HTTP date after which this operation may stop answering.', required: true, schema: { type: 'string' } };
  }
  for (const [status, response] of Object.entries<any>(op.responses ?? {})) {
    const own = resolveResponse(doc, response);
    if (own === null) continue;
    // A collection's Link (rel="next") is already declared: the deprecation link goes in the same field.
    const declared = own.headers?.Link === undefined ? headers : { ...headers, Link: own.headers.Link };
    op.responses[status] = { ...own, headers: { ...own.headers, ...declared } };
  }
}

/** A response object, the component it refers to copied when it is a `$ref` (null when it resolves to nothing). */
function resolveResponse(doc: OpenApiDocument, response: any): any {
  if (typeof response !== 'object' || response === null) return null;
  if (!('$ref' in response)) return response;
  const name = /^#\/components\/responses\/(.+)$/.exec(String(response.$ref))?.[1];
  const component = name === undefined ? undefined : (doc.components?.responses as Record<string, unknown> | undefined)?.[name];
  if (typeof component !== 'object' || component === null) return null;
  const copy = structuredClone(component) as any;
  // The component's own CORS header stays declared on the copy.
  declareCorsHeader(copy);
  return copy;
}

/** The header every published response refers to must be declared, with its description, in openapi.yaml. */
export function checkPublishable(doc: OpenApiDocument, problems: Problems): void {
  if (!doc.components?.headers?.[CORS_HEADER]) {
    problems.add('openapi.yaml', 'components.headers', `must declare ${CORS_HEADER} (the published contract names it on every response)`);
  }
}
