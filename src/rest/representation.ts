import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Exchange } from '../pipeline/exchange.js';
import { entityTag, matchesAny } from './entity-tag.js';
import type { RouteDefinition } from './route-definition.js';
import { serializerFor } from './serialization.js';

/** Caching headers, vendor media type, and ETag / If-None-Match on every successful GET. */
export function represent(ex: Exchange, request: FastifyRequest, reply: FastifyReply, payload: unknown): unknown {
  const status = reply.statusCode;
  const contentType = String(reply.getHeader('content-type') ?? '');
  if (ex.mediaType && contentType.includes('json')) reply.header('content-type', ex.mediaType);
  if (ex.route.deprecated) reply.headers(ex.route.deprecationHeaders);
  if (request.method !== 'GET' && request.method !== 'HEAD') {
    reply.header('cache-control', 'no-store');
    return payload;
  }
  if (status >= 300) {
    reply.header('cache-control', 'no-store');
    return payload;
  }
  reply.header('cache-control', ex.principal.kind === 'anonymous' ? 'public, no-cache' : 'private, no-cache');
  if (status === 200 && (typeof payload === 'string' || Buffer.isBuffer(payload))) {
    const tag = entityTag(payload);
    reply.header('etag', tag);
    if (matchesAny(request.headers['if-none-match'], tag, true)) {
      reply.code(304);
      reply.removeHeader('content-type');
      reply.removeHeader('content-length');
      return '';
    }
  }
  return payload;
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
