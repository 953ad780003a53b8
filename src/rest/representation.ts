import type { FastifyReply } from 'fastify';
import { rateLimitHeaders } from '../limits/rate-limit.js';
import { entityTag, matchesAny } from './entity-tag.js';
import type { RestExchange } from './rest-exchange.js';
import type { RouteDefinition } from './route-definition.js';
import { serializerFor } from './serialization.js';
import { bodyInMediaType } from './versioning.js';

export interface HandlerResponse {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
  /** Top-level body properties shown once and never stored, not even for an idempotent replay. */
  secrets?: readonly string[];
}

const JSON_TYPE = 'application/json; charset=utf-8';

/**
 * Headers every response to an exchange carries, success or error: rate limit, `Vary`, and the
 * deprecation notice of a deprecated operation.
 */
export function applyExchangeHeaders(ex: RestExchange, reply: FastifyReply): void {
  reply.headers(ex.responseHeaders);
  if (ex.rateLimit !== null) reply.headers(rateLimitHeaders(ex.rateLimit));
  if (ex.route.deprecated) reply.headers(ex.route.deprecationHeaders);
}

/** A JSON response answers in the vendor media type when the client asked for it (versioning.ts). */
function contentTypeFor(ex: RestExchange, mediaType: string): string {
  return ex.mediaType !== null && mediaType.includes('json') ? ex.mediaType : mediaType;
}

/**
 * A handler's result as the response: serialised with the contract's schema for its status (fields outside
 * the contract are never sent), caching headers, and on a successful GET an ETag with If-None-Match (304).
 */
export function sendRepresentation(ex: RestExchange, reply: FastifyReply, result: HandlerResponse): FastifyReply {
  reply.code(result.status);
  applyExchangeHeaders(ex, reply);
  if (result.headers) reply.headers(result.headers);
  const readOnly = ex.method === 'GET' || ex.method === 'HEAD';
  if (!readOnly || result.status >= 300) {
    reply.header('cache-control', 'no-store');
  } else {
    reply.header('cache-control', ex.principal.kind === 'anonymous' ? 'public, no-cache' : 'private, no-cache');
  }
  if (result.status === 204) return reply.send();
  let payload: string;
  if (typeof result.body === 'string') {
    // A document serialised once at start-up, in its own media type (the published contract, the SDL).
    payload = result.body;
    reply.header('content-type', contentTypeFor(ex, `${ex.route.successMediaType ?? 'text/plain'}; charset=utf-8`));
  } else {
    payload = serializerFor(ex.route.schema.response[String(result.status)]!)(result.body);
    reply.header('content-type', contentTypeFor(ex, JSON_TYPE));
  }
  if (readOnly && result.status === 200) {
    const tag = entityTag(payload);
    reply.header('etag', tag);
    if (matchesAny(ex.headers['if-none-match'], tag, true)) {
      reply.code(304);
      reply.removeHeader('content-type');
      return reply.send();
    }
  }
  return reply.send(bodyInMediaType(payload, ex.mediaType));
}

/**
 * The ETag a GET of this resource would carry: the resource rendered with the GET operation's response
 * serialiser, hashed the same way. Used to evaluate If-Match on PUT and DELETE.
 */
export function representationTagger(routes: readonly RouteDefinition[]) {
  const getRoutes = new Map(routes.filter((r) => r.method === 'GET').map((r) => [r.path, r]));
  return (route: RouteDefinition, resource: Record<string, unknown>): string | null => {
    const schema = getRoutes.get(route.path)?.schema.response['200'];
    return schema ? entityTag(serializerFor(schema)(resource)) : null;
  };
}
