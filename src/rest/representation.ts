import type { FastifyReply } from 'fastify';
import { rateLimitField } from '../limits/rate-limit.js';
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
  const rateLimit = ex.rateLimit;
  if (rateLimit !== null) reply.header('ratelimit-policy', rateLimit.policyField).header('ratelimit', rateLimitField(rateLimit));
  if (ex.route.deprecated) {
    const { link, ...notice } = ex.route.deprecationHeaders;
    reply.headers(notice);
    // Beside a collection's rel="next" (RFC 8288 allows several links in one field), not instead of it.
    if (link !== undefined) {
      const existing = reply.getHeader('link');
      if (typeof existing !== 'string') reply.header('link', link);
      else if (!existing.includes(link)) reply.header('link', `${existing}, ${link}`);
    }
  }
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

export interface RepresentationTagger {
  /**
   * The ETag a GET of this resource would carry: the resource rendered with the GET operation's response
   * serialiser, hashed the same way. Used to evaluate If-Match on PUT and DELETE.
   */
  current(route: RouteDefinition, resource: Record<string, unknown>): string | null;
  /**
   * The ETag a GET of what a write just returned would carry (a PUT's resource, a POST's created one at its
   * `Location`), so that the next conditional write needs no GET first; null when the write returned no
   * representation or it has no GET. Secrets shown once (a client secret) are not part of it.
   */
  written(route: RouteDefinition, result: HandlerResponse): string | null;
}

export function representationTagger(routes: readonly RouteDefinition[]): RepresentationTagger {
  const gets = routes.filter((r) => r.method === 'GET' && r.schema.response['200']);
  const getRoutes = new Map(gets.map((r) => [r.path, r]));
  // A Location names the created resource; its GET route is the one whose path pattern it matches.
  const byLocation = gets.map((r) => ({ route: r, pattern: new RegExp(`^${r.path.replace(/\{[^}]+\}/g, '[^/]+')}$`) }));
  const tagOf = (get: RouteDefinition | undefined, resource: Record<string, unknown>): string | null =>
    get ? entityTag(serializerFor(get.schema.response['200']!)(resource)) : null;
  return {
    current: (route, resource) => tagOf(getRoutes.get(route.path), resource),
    written(route, result) {
      if (result.body === null || typeof result.body !== 'object' || Array.isArray(result.body)) return null;
      let get: RouteDefinition | undefined;
      if ((route.method === 'PUT' || route.method === 'PATCH') && result.status === 200) get = getRoutes.get(route.path);
      else if (route.method === 'POST' && result.status === 201 && result.headers?.location) {
        const location = result.headers.location;
        get = byLocation.find((candidate) => candidate.pattern.test(location))?.route;
      }
      if (!get) return null;
      const body = { ...(result.body as Record<string, unknown>) };
      for (const secret of result.secrets ?? []) delete body[secret];
      return tagOf(get, body);
    },
  };
}
