import type { FastifyReply, FastifyRequest, onSendHookHandler } from 'fastify';

/**
 * CORS (Fetch standard, "CORS protocol") for browser apps served from the origins CORS_ORIGINS lists.
 * An origin is allowed only when `Origin` equals a listed one byte for byte; the answer names that origin,
 * never `*`. There is no `Access-Control-Allow-Credentials`: a browser app sends the bearer token it holds
 * in memory, and no cookie of this server is ever sent cross-origin.
 *
 * Where it applies: the REST API, `POST /graphql`, and the authorization-server endpoints a browser app
 * calls — token, revocation, userinfo, JWKS and discovery. (GraphQL's own CSRF defence, JSON bodies only,
 * stands: a listed origin's request is an authorized one, with its bearer token.) Not the HTML pages under /oauth/ (authorize, login, consent,
 * device, account, logout: a page readable cross-origin would give away its CSRF token), not token
 * introspection (RFC 7662 §2.1: protected resources, server to server), not device authorization (input-
 * constrained devices, RFC 8628). The list is by path, so an endpoint added later is covered by its path
 * alone, and nothing else is.
 */
const API_PREFIX = '/v1/';
const ENDPOINTS: ReadonlySet<string> = new Set([
  '/oauth/token',
  '/oauth/revoke',
  '/oauth/userinfo',
  '/oauth/jwks',
  '/.well-known/jwks.json',
  '/.well-known/oauth-authorization-server',
  '/.well-known/openid-configuration',
  '/graphql',
]);

/**
 * Request headers beyond the CORS-safelisted ones: the token, JSON bodies, the contract's header parameters,
 * and W3C trace context (`traceparent`), whose trace id the request's log lines and audit event carry.
 */
export const ALLOWED_REQUEST_HEADERS = ['Authorization', 'Content-Type', 'If-Match', 'If-None-Match', 'Idempotency-Key', 'traceparent'];

/**
 * Response headers a browser app may read beyond the CORS-safelisted response-header names (Cache-Control,
 * Content-Type, ...): those the contract declares, the request id, and the deprecation notice (RFC 9745,
 * RFC 8594). A test keeps this list and the contract in step.
 */
export const EXPOSED_RESPONSE_HEADERS = [
  'ETag', 'Location', 'Link', 'Allow', 'RateLimit', 'RateLimit-Policy', 'Retry-After', 'WWW-Authenticate',
  'Idempotent-Replayed', 'X-Request-Id', 'Deprecation', 'Sunset',
];

const ALLOW_HEADERS = ALLOWED_REQUEST_HEADERS.join(', ');
const EXPOSE_HEADERS = EXPOSED_RESPONSE_HEADERS.join(', ');

/** Seconds a browser may reuse a preflight answer; Chromium caps it at 7200, Firefox at 86400. */
const PREFLIGHT_MAX_AGE = '7200';

/** Whether CORS covers a path (a route's pattern, or the request path when no route matched). */
export function corsCovers(path: string): boolean {
  return path.startsWith(API_PREFIX) || ENDPOINTS.has(path);
}

/** The route that answers, or for a path no route has, the request path (the router ignores a trailing slash). */
function pathOf(request: FastifyRequest): string {
  const route = request.routeOptions.url;
  if (route !== undefined) return route;
  const path = request.url.split('?', 1)[0]!;
  return path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path;
}

/** A CORS-preflight request (Fetch standard, CORS protocol, "HTTP requests"): OPTIONS naming the method to come. */
export function isPreflight(request: FastifyRequest): boolean {
  return request.method === 'OPTIONS' && request.headers['access-control-request-method'] !== undefined;
}

/**
 * Why a preflight got no grant, for the developer reading the browser's network panel: the browser reports
 * only "blocked by CORS policy", whatever the status. Nothing in it is a secret: the answer's headers show it.
 */
export function preflightRefusal(request: FastifyRequest, cors: Cors | null): string {
  if (!corsCovers(pathOf(request))) return 'This endpoint cannot be called from another origin.';
  if (cors === null) return 'Cross-origin requests are off on this server (CORS_ORIGINS is not set).';
  return 'This origin is not one CORS_ORIGINS lists, so a browser may not call the API from it.';
}

export class Cors {
  readonly #origins: ReadonlySet<string>;

  constructor(origins: readonly string[]) {
    this.#origins = new Set(origins);
  }

  /**
   * onSend, so that every response of a covered path carries the headers, errors included (a browser app
   * can then read a 401 or 429 body), whatever set `Vary` before. `Vary: Origin` goes on all of them, even
   * to an origin that is not listed, so a shared cache never serves one origin's answer to another.
   */
  readonly onSend: onSendHookHandler = (request, reply, payload, done) => {
    if (corsCovers(pathOf(request))) {
      appendVary(reply, 'Origin');
      const origin = request.headers.origin;
      if (origin !== undefined && this.#origins.has(origin)) {
        reply.header('access-control-allow-origin', origin);
        if (!isPreflight(request)) reply.header('access-control-expose-headers', EXPOSE_HEADERS);
      }
    }
    done(null, payload);
  };

  /**
   * The headers of a successful preflight (Fetch standard, "CORS-preflight fetch"), which onSend completes with
   * the origin; `methods` are those the path really has. Null when the request is no preflight, comes from
   * an origin not listed, or is for a path CORS does not cover: it is then answered as any OPTIONS request.
   */
  preflight(request: FastifyRequest, methods: readonly string[]): Record<string, string> | null {
    const origin = request.headers.origin;
    if (!isPreflight(request) || origin === undefined || !this.#origins.has(origin)) return null;
    if (methods.length === 0 || !corsCovers(pathOf(request))) return null;
    return {
      'access-control-allow-methods': methods.join(', '),
      'access-control-allow-headers': ALLOW_HEADERS,
      'access-control-max-age': PREFLIGHT_MAX_AGE,
    };
  }
}

function appendVary(reply: FastifyReply, field: string): void {
  const current = reply.getHeader('vary');
  if (current === undefined || current === '') reply.header('vary', field);
  else if (!String(current).split(/\s*,\s*/).some((name) => name === '*' || name.toLowerCase() === field.toLowerCase())) {
    reply.header('vary', `${String(current)}, ${field}`);
  }
}
