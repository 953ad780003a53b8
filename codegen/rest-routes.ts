import type { HttpMethod, JsonSchema, RouteDefinition } from '../src/rest/route-definition.js';
import { checkAccess, type PolicySource } from './access-rule.js';
import { deref, toRuntimeSchema, type OpenApiDocument } from './json-schema.js';
import type { Problems } from './problems.js';

const METHODS: HttpMethod[] = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];
/** The request body media types a route may take: JSON, and JSON merge patch (RFC 7396) for PATCH. */
const BODY_MEDIA_TYPES: Readonly<Record<string, HttpMethod[]>> = { 'application/json': ['POST', 'PUT', 'DELETE'], 'application/merge-patch+json': ['PATCH'] };
const VERSION_PREFIX = /^\/v1(?=\/|$)/;

/** The route table, and the schemas its routes share by reference. */
export interface CompiledRoutes {
  routes: RouteDefinition[];
  /** Each with its `$id`, the contract's component name; a route names one as `{ $ref: '<name>#' }`. */
  sharedSchemas: JsonSchema[];
}

const SHARED_RESPONSE = /^#\/components\/responses\//;
const COMPONENT_SCHEMA = /^#\/components\/schemas\/([^/]+)$/;

/** Compiles every operation of openapi.yaml into a route definition. */
export function compileRoutes(
  doc: OpenApiDocument,
  scopes: Record<string, string>,
  policy: PolicySource,
  problems: Problems,
): CompiledRoutes {
  const file = 'openapi.yaml';
  const routes: RouteDefinition[] = [];
  const shared = new Set<string>();
  const seen = new Set<string>();
  for (const [path, pathItem] of Object.entries<any>(doc.paths ?? {})) {
    if (!VERSION_PREFIX.test(path)) problems.add(file, path, 'paths must start with /v1');
    for (const method of Object.keys(pathItem)) {
      if (['parameters', 'summary', 'description', 'servers'].includes(method) || method.startsWith('x-')) continue;
      if (!METHODS.includes(method.toUpperCase() as HttpMethod)) {
        problems.add(file, `${method.toUpperCase()} ${path}`, `method not supported (use ${METHODS.join(', ')})`);
      }
    }
    for (const method of METHODS) {
      const op = pathItem[method.toLowerCase()];
      if (!op) continue;
      const where = `${method} ${path} (${op.operationId ?? 'no operationId'})`;
      if (typeof op.operationId !== 'string') {
        problems.add(file, where, 'has no operationId');
        continue;
      }
      if (seen.has(op.operationId)) problems.add(file, where, 'operationId is not unique');
      seen.add(op.operationId);
      routes.push(compileOperation(doc, path, method, op, pathItem.parameters ?? [], { file, where, scopes, policy, problems, shared }));
    }
  }
  for (const route of routes) {
    const replacement = route.deprecationHeaders.link && /#operation\/([^>]+)>/.exec(route.deprecationHeaders.link)?.[1];
    if (replacement && !seen.has(replacement)) problems.add(file, `${route.method} ${route.path} (${route.operationId})`, `x-replaced-by names no operation: ${replacement}`);
  }
  // In the contract's order of components.schemas, so that the generated file changes only where the contract does.
  const sharedSchemas = Object.keys(doc.components?.schemas ?? {})
    .filter((name) => shared.has(name))
    .map((name) => ({ $id: name, ...toRuntimeSchema(doc, doc.components.schemas[name]) }));
  return { routes, sharedSchemas };
}

interface Ctx {
  file: string;
  where: string;
  scopes: Record<string, string>;
  policy: PolicySource;
  problems: Problems;
  /** Names of the component schemas referenced so far. */
  shared: Set<string>;
}

function compileOperation(doc: OpenApiDocument, path: string, method: HttpMethod, op: any, shared: any[], ctx: Ctx): RouteDefinition {
  const parameters = [...shared, ...(op.parameters ?? [])].map((p) => deref(doc, p));
  const byLocation = (location: string) => parameters.filter((p) => p.in === location);

  const schema: RouteDefinition['schema'] = { response: {} };
  const pathParams = byLocation('path');
  if (pathParams.length > 0) schema.params = objectSchema(doc, pathParams, false, true);
  const query = byLocation('query');
  if (query.length > 0) schema.querystring = objectSchema(doc, query, false);
  const headers = byLocation('header');
  if (headers.length > 0) schema.headers = objectSchema(doc, headers, true);

  const body = op.requestBody ? deref(doc, op.requestBody) : null;
  let bodyMediaType: string | null = null;
  if (body) {
    const types = Object.keys(body.content ?? {});
    const allowed = Object.entries(BODY_MEDIA_TYPES).filter(([, methods]) => methods.includes(method)).map(([type]) => type);
    if (types.length !== 1 || !allowed.includes(types[0]!) || !body.content[types[0]!]?.schema) {
      ctx.problems.add(ctx.file, ctx.where, `request body must be one of ${allowed.join(', ')}, with a schema`);
    } else {
      bodyMediaType = types[0]!;
      schema.body = toRuntimeSchema(doc, body.content[bodyMediaType].schema);
    }
  } else if (method === 'PATCH') {
    ctx.problems.add(ctx.file, ctx.where, 'PATCH needs a request body');
  }

  let successStatus = 0;
  let successMediaType: string | null = null;
  for (const [status, rawResponse] of Object.entries<any>(op.responses ?? {})) {
    const response = deref(doc, rawResponse);
    const [mediaType, content] = Object.entries<any>(response.content ?? {})[0] ?? [null, null];
    if (/^2\d\d$/.test(status) && successStatus === 0) {
      successStatus = Number(status);
      successMediaType = mediaType;
    }
    if (content?.schema) schema.response[status] = responseSchema(doc, rawResponse, content.schema, ctx);
  }
  if (successStatus === 0) ctx.problems.add(ctx.file, ctx.where, 'declares no 2xx response');

  const expandParam = query.find((p) => p.name === 'expand');
  const expand: string[] = expandParam ? (deref(doc, expandParam.schema)?.items?.enum ?? []) : [];

  const access = checkAccess(
    { ...ctx, idParams: pathParams.map((p) => p.name) },
    `rest:${op.operationId}`,
    {
      public: op['x-public'],
      authenticated: op['x-authenticated'],
      scopes: op['x-scopes'],
      permission: op['x-permission'],
      resource: op['x-resource'],
      deprecated: op.deprecated,
    },
  );

  return {
    operationId: op.operationId,
    method,
    path,
    unversionedUrl: unversionedUrl(path),
    tag: op.tags?.[0] ?? 'default',
    summary: op.summary ?? '',
    deprecated: op.deprecated === true,
    deprecationHeaders: deprecationHeaders(op, ctx),
    successStatus,
    successMediaType,
    bodyMediaType,
    expand,
    schema,
    access,
  };
}

/**
 * The schema of a response the contract shares (`components/responses`, the error responses every operation
 * lists) is referenced, not copied into every status of every route; an operation's own response is inline.
 */
function responseSchema(doc: OpenApiDocument, rawResponse: any, contentSchema: any, ctx: Ctx): JsonSchema {
  const component = typeof contentSchema.$ref === 'string' ? COMPONENT_SCHEMA.exec(contentSchema.$ref)?.[1] : undefined;
  if (component === undefined || typeof rawResponse.$ref !== 'string' || !SHARED_RESPONSE.test(rawResponse.$ref)) {
    return toRuntimeSchema(doc, contentSchema);
  }
  ctx.shared.add(component);
  return { $ref: `${component}#` };
}

function objectSchema(doc: OpenApiDocument, params: any[], headers: boolean, allRequired = false): JsonSchema {
  const properties: Record<string, JsonSchema> = {};
  const required: string[] = [];
  for (const p of params) {
    const name = headers ? String(p.name).toLowerCase() : String(p.name);
    properties[name] = toRuntimeSchema(doc, p.schema ?? {});
    if (p.required || allRequired) required.push(name);
  }
  // Unknown query parameters are errors (no silent mass assignment through the query string either);
  // headers are open because clients and proxies send many.
  return { type: 'object', properties, required, additionalProperties: headers };
}

/** RFC 9745 needs the date the deprecation took effect; RFC 8594's Sunset is optional. */
function deprecationHeaders(op: any, ctx: Ctx): Record<string, string> {
  const since = op['x-deprecated-since'];
  const sunset = op['x-sunset'];
  if (op.deprecated !== true) {
    if (since !== undefined || sunset !== undefined || op['x-replaced-by'] !== undefined) {
      ctx.problems.add(ctx.file, ctx.where, 'x-deprecated-since / x-sunset / x-replaced-by need deprecated: true');
    }
    return {};
  }
  const replacement = op['x-replaced-by'];
  if (replacement !== undefined && typeof replacement !== 'string') ctx.problems.add(ctx.file, ctx.where, 'x-replaced-by must name an operationId');
  const sinceMs = Date.parse(String(since));
  if (since === undefined || Number.isNaN(sinceMs)) {
    ctx.problems.add(ctx.file, ctx.where, 'is deprecated but has no x-deprecated-since date (RFC 9745)');
    return {};
  }
  // RFC 9745 §3: where the deprecation is explained — the replacement's section of the API reference, or
  // the operation's own when nothing replaces it.
  const documented = typeof replacement === 'string' ? replacement : op.operationId;
  const headers: Record<string, string> = {
    deprecation: `@${Math.floor(sinceMs / 1000)}`,
    link: `</docs#operation/${documented}>; rel="deprecation"; type="text/html"`,
  };
  if (sunset !== undefined) {
    const sunsetMs = Date.parse(String(sunset));
    if (Number.isNaN(sunsetMs) || sunsetMs <= sinceMs) ctx.problems.add(ctx.file, ctx.where, 'x-sunset must be a date after x-deprecated-since');
    else headers.sunset = new Date(sunsetMs).toUTCString();
  }
  return headers;
}

/**
 * Paths without the version prefix that another API owns: `/graphql` is the GraphQL endpoint (POST, and GET
 * answers 405), so the SDL is served at `/v1/graphql` only.
 */
const RESERVED_UNVERSIONED = new Set(['/graphql']);

/** The path without its version prefix, in Fastify's syntax, or null when that path belongs to another API. */
function unversionedUrl(path: string): string | null {
  const url = path.replace(VERSION_PREFIX, '').replace(/\{([^}]+)\}/g, ':$1') || '/';
  return RESERVED_UNVERSIONED.has(url) ? null : url;
}
