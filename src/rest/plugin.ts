import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from '../errors/registry.js';
import { renderRestError } from '../errors/rest-renderer.js';
import { handlers } from '../operations/index.js';
import type { Handler } from '../operations/types.js';
import type { AuditLog } from '../audit/audit-log.js';
import type { Exchange } from '../pipeline/exchange.js';
import { runPhase } from '../pipeline/rest-pipeline.js';
import type { StageDeps } from '../pipeline/stages.js';
import { ANONYMOUS } from '../policy/principal.js';
import { entityTag, matchesAny } from './entity-tag.js';
import { fromFastifyError } from './error-response.js';
import { runIdempotent, type HandlerResponse } from './idempotency.js';
import { parseJsonBody } from './json-body.js';
import { nextLink } from './link-header.js';
import type { RouteDefinition } from './route-definition.js';
import { serializerCompiler, serializerFor } from './serialization.js';
import { validatorCompiler } from './validation.js';
import { VENDOR_TYPE } from './versioning.js';

export interface RestDeps extends StageDeps {
  routes: readonly RouteDefinition[];
  audit: AuditLog;
}

declare module 'fastify' {
  interface FastifyRequest {
    exchange: Exchange | null;
  }
  interface FastifyContextConfig {
    route?: RouteDefinition;
  }
}

/** For operations that declare no query parameters: any query parameter is unknown, hence a 400. */
const NO_QUERY_PARAMETERS = { type: 'object', additionalProperties: false } as const;

/** Registers one Fastify route per contract operation (under /v1 and unprefixed) and the REST pipeline. */
export async function registerRest(app: FastifyInstance, deps: RestDeps): Promise<void> {
  const representationOf = representationTagger(deps.routes);

  await app.register(async (scope) => {
    scope.setValidatorCompiler(validatorCompiler);
    scope.setSerializerCompiler(serializerCompiler);
    // JSON only (and its vendor form); prototype-poisoning keys are refused, not stripped.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser(['application/json', VENDOR_TYPE], { parseAs: 'string' }, parseJsonBody);
    scope.decorateRequest('exchange', null);

    scope.addHook('onRequest', async (request) => {
      const route = request.routeOptions.config.route;
      if (!route) return;
      const path = request.url.split('?', 1)[0]!;
      const ex: Exchange = {
        route,
        requestId: request.id,
        ip: request.ip,
        method: request.method,
        path,
        pathVersioned: path.startsWith('/v1/'),
        headers: request.headers,
        query: request.query as Record<string, unknown>,
        params: request.params as Record<string, string>,
        body: undefined,
        principal: ANONYMOUS,
        resource: null,
        mediaType: null,
        responseHeaders: { vary: 'Authorization, Accept' },
        decision: null,
      };
      request.exchange = ex;
      await runPhase('request', ex, deps);
    });

    scope.addHook('preValidation', async (request) => {
      const ex = request.exchange;
      if (!ex) return;
      mergeBracketExpand(request.query as Record<string, unknown>);
      ex.body = request.body;
      await runPhase('body', ex, deps);
    });

    scope.addHook('preHandler', async (request) => {
      const ex = request.exchange;
      if (!ex) return;
      ex.params = request.params as Record<string, string>;
      ex.query = request.query as Record<string, unknown>;
      ex.body = request.body;
      await runPhase('resource', ex, deps);
      // RFC 9110 §13.1.1: a PUT or DELETE with If-Match proceeds only when the current representation matches.
      const ifMatch = request.headers['if-match'];
      if (ifMatch !== undefined && ex.resource && (ex.method === 'PUT' || ex.method === 'DELETE')) {
        const current = representationOf(ex.route, ex.resource);
        if (current === null || !matchesAny(ifMatch, current, false)) throw new ApiError('PRECONDITION_FAILED');
      }
    });

    scope.addHook('onSend', async (request, reply, payload) => {
      const ex = request.exchange;
      if (!ex) return payload;
      reply.headers(ex.responseHeaders);
      return represent(ex, request, reply, payload);
    });

    scope.addHook('onResponse', async (request) => {
      const ex = request.exchange;
      if (!ex?.decision) return;
      const principal = ex.principal;
      deps.audit.record({
        requestId: ex.requestId,
        subject: principal.kind === 'anonymous' ? null : principal.subject,
        clientId: principal.kind === 'anonymous' ? null : principal.clientId,
        interface: 'rest',
        operation: ex.route.operationId,
        resourceType: ex.route.access.resource?.type ?? null,
        resourceId: auditableId(ex.route.access.resource ? ex.params[ex.route.access.resource.param] : undefined),
        decision: ex.decision.decision,
        reason: ex.decision.reason,
      });
    });

    scope.setErrorHandler(async (error, request, reply) => {
      const rendered = renderRestError(fromFastifyError(error));
      if (rendered.status >= 500) request.log.error({ err: error }, 'request failed');
      return reply.code(rendered.status).headers(rendered.headers).send(rendered.body);
    });

    for (const route of deps.routes) {
      const handler = handlers[route.operationId as keyof typeof handlers] as unknown as Handler<never>;
      for (const url of [route.path.replace(/\{([^}]+)\}/g, ':$1'), route.unversionedUrl]) {
        scope.route({
          method: route.method,
          url,
          schema: { querystring: NO_QUERY_PARAMETERS, ...route.schema },
          config: { route },
          handler: async (request, reply) => {
            const ex = request.exchange!;
            const result = await runIdempotent(deps.operations.db, ex, () =>
              handler(
                { params: request.params, query: request.query, body: request.body } as never,
                { principal: ex.principal, resource: ex.resource, deps: deps.operations },
              ) as Promise<HandlerResponse>,
            );
            reply.code(result.status);
            if (result.replayed) reply.header('idempotent-replayed', 'true');
            if (result.headers) reply.headers(result.headers);
            const next = (result.body as { page?: { next?: string | null } } | undefined)?.page?.next;
            if (typeof next === 'string') reply.header('link', nextLink(request.url, next));
            if (result.status === 204) return reply.send();
            if (route.successMediaType && typeof result.body === 'string') reply.type(`${route.successMediaType}; charset=utf-8`);
            return result.body;
          },
        });
      }
    }
  });
}

// A denial can come before validation: only a well-formed id goes into the audit record.
const AUDITABLE_ID = /^[A-Za-z0-9_-]{1,64}$/;

function auditableId(id: string | undefined): string | null {
  return id !== undefined && AUDITABLE_ID.test(id) ? id : null;
}

/** `expand[]=author` is accepted as a synonym of `expand=author`. */
function mergeBracketExpand(query: Record<string, unknown>): void {
  if (!query || !('expand[]' in query)) return;
  const bracket = query['expand[]'];
  const plain = query.expand;
  query.expand = [...toArray(plain), ...toArray(bracket)];
  delete query['expand[]'];
}

function toArray(value: unknown): unknown[] {
  return value === undefined ? [] : Array.isArray(value) ? value : [value];
}

/** Caching headers, vendor media type, and ETag / If-None-Match on every successful GET. */
function represent(ex: Exchange, request: FastifyRequest, reply: FastifyReply, payload: unknown): unknown {
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
function representationTagger(routes: readonly RouteDefinition[]) {
  const getRoutes = new Map(routes.filter((r) => r.method === 'GET').map((r) => [r.path, r]));
  return (route: RouteDefinition, resource: Record<string, unknown>): string | null => {
    const schema = getRoutes.get(route.path)?.schema.response['200'];
    return schema ? entityTag(serializerFor(schema)(resource)) : null;
  };
}
