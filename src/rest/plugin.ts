import type { FastifyInstance } from 'fastify';
import { ApiError } from '../errors/registry.js';
import { handlers } from '../operations/index.js';
import type { Handler } from '../operations/types.js';
import type { AuditLog } from '../audit/audit-log.js';
import type { Exchange } from '../pipeline/exchange.js';
import { recordDecision } from '../pipeline/record-decision.js';
import { runPhase } from '../pipeline/rest-pipeline.js';
import type { StageDeps } from '../pipeline/stages.js';
import { ANONYMOUS } from '../policy/principal.js';
import { matchesAny } from './entity-tag.js';
import { fromFastifyError } from './error-response.js';
import { runIdempotent, type HandlerResponse } from './idempotency.js';
import { parseJsonBody } from './json-body.js';
import { sendRestError } from './send-error.js';
import { nextLink } from './link-header.js';
import type { RouteDefinition } from './route-definition.js';
import { represent, representationTagger } from './representation.js';
import { serializerCompiler } from './serialization.js';
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
      if (request.exchange) recordDecision(request.exchange, deps.audit);
    });

    scope.setErrorHandler(async (error, _request, reply) => sendRestError(reply, fromFastifyError(error)));

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
