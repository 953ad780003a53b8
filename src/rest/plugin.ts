import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Handler, HandlerTable } from '../operations/types.js';
import { ResourceLoaders } from '../resources/loaders.js';
import { thenMaybe, type MaybePromise } from '../policy/maybe-promise.js';
import type { AuditLog } from '../audit/audit-log.js';
import type { DeprecatedUse } from '../deprecations/deprecated-use.js';
import { recordDecision } from '../pipeline/record-decision.js';
import { ANONYMOUS } from '../policy/principal.js';
import { fromFastifyError } from './error-response.js';
import { runIdempotent } from './idempotency.js';
import { parseJsonBody } from './json-body.js';
import type { RestExchange } from './rest-exchange.js';
import { phaseRunners, type PhaseRunners } from './rest-pipeline.js';
import { MERGE_PATCH_TYPE, type RestStageDeps } from './rest-stages.js';
import { sendRestError } from './send-error.js';
import { nextLink } from './link-header.js';
import type { RouteDefinition } from './route-definition.js';
import { applyExchangeHeaders, sendRepresentation, type HandlerResponse } from './representation.js';
import { serializerCompiler } from './serialization.js';
import { requestValidator } from './validation.js';
import { VENDOR_TYPE } from './versioning.js';

export interface RestDeps extends RestStageDeps {
  routes: readonly RouteDefinition[];
  /** operationId -> handler, for every route. */
  handlers: HandlerTable;
  audit: AuditLog;
  /** Counts uses of deprecated operations per client. */
  deprecatedUse: DeprecatedUse;
  /** From KEY_ENCRYPTION_SECRET (idempotency.ts says why). */
  idempotencyHashKey: Buffer;
}

declare module 'fastify' {
  interface FastifyRequest {
    exchange: RestExchange | null;
  }
  interface FastifyContextConfig {
    route?: RouteDefinition;
  }
}

/**
 * Registers one Fastify route per contract operation (under /v1 and unprefixed) and runs the REST pipeline
 * (rest-pipeline.ts) on them: its `request` phase in `onRequest`, before the body is read;
 * its `body` phase, the operation and the response in the route handler; once it is answered, the server's
 * onResponse hook hands the exchange to `restExchangeAnswered`. Validation is the pipeline's own `validate`
 * stage, so Fastify is given only the response schemas (for serialising error bodies).
 */
export async function registerRest(app: FastifyInstance, deps: RestDeps): Promise<void> {
  await app.register(async (scope) => {
    scope.setSerializerCompiler(serializerCompiler);
    // JSON only (its vendor form, and JSON merge patch for PATCH; each route takes its own: check-body-type);
    // prototype-poisoning keys are refused, not stripped.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser(['application/json', VENDOR_TYPE, MERGE_PATCH_TYPE], { parseAs: 'buffer' }, parseJsonBody);
    scope.decorateRequest('exchange', null);

    scope.setErrorHandler((error, request, reply) => {
      const ex = request.exchange;
      if (ex) applyExchangeHeaders(ex, reply);
      return sendRestError(reply, fromFastifyError(error), ex?.mediaType ?? null);
    });

    for (const route of deps.routes) {
      requestValidator(route); // compiled now, not on the first request
      const runners = phaseRunners(route);
      const handle = operationRunner(route, runners, deps);
      const onRequest = requestPhase(route, runners, deps);
      const versioned = route.path.replace(/\{([^}]+)\}/g, ':$1');
      for (const url of route.unversionedUrl === null ? [versioned] : [versioned, route.unversionedUrl]) {
        scope.route({ method: route.method, url, schema: { response: route.schema.response }, config: { route }, onRequest, handler: handle });
      }
    }
  });
}

/**
 * Once a REST request has been answered, whichever way it ended (the server's onResponse hook calls this for
 * every request that reached its route's pipeline): its decision goes to the audit log, and an allowed use
 * of a deprecated operation is counted.
 */
export function restExchangeAnswered(ex: RestExchange, statusCode: number, deps: Pick<RestDeps, 'audit' | 'deprecatedUse'>): void {
  recordDecision(ex, deps.audit);
  // A deprecated operation that was allowed and ran is a use to count (its client must move on); a request
  // refused as invalid after the decision (400, 412, ...) did not use it.
  if (ex.route.deprecated && ex.decision?.decision === 'allow' && (statusCode < 400 || statusCode >= 500)) {
    deps.deprecatedUse.record(ex.principal.kind === 'anonymous' ? null : ex.principal.clientId, 'rest', ex.route.operationId);
  }
}

/** What every answer to a REST request carries beside its own headers (never changed: shared). */
const EXCHANGE_HEADERS: Readonly<Record<string, string>> = Object.freeze({ vary: 'Authorization, Accept' });

/** The request as the pipeline's exchange, with what only REST needs beside it. */
export function openExchange(request: FastifyRequest, route: RouteDefinition): RestExchange {
  const url = request.url;
  const queryStart = url.indexOf('?');
  const path = queryStart < 0 ? url : url.slice(0, queryStart);
  const headers = request.headers;
  const query = request.query as Record<string, unknown>;
  const params = request.params as Record<string, string>;
  const target = route.access.resource;
  return {
    interface: 'rest',
    operationId: route.operationId,
    access: route.access,
    resourceId: target ? params[target.param] : undefined,
    credentials: { authorization: headers.authorization, tokenInQuery: 'access_token' in query },
    requestId: request.id,
    sourceAddress: request.ip,
    principal: ANONYMOUS,
    resource: null,
    rateLimit: null,
    decision: null,
    route,
    method: request.method,
    path,
    pathVersioned: path.startsWith('/v1/'),
    headers,
    query,
    params,
    body: undefined,
    mediaType: null,
    responseHeaders: EXCHANGE_HEADERS,
  };
}

/** The route's onRequest hook: the pipeline's `request` phase, before the body is read. */
function requestPhase(route: RouteDefinition, runners: PhaseRunners, deps: RestDeps) {
  return (request: FastifyRequest, _reply: FastifyReply, done: (error?: Error) => void) => {
    const ex = openExchange(request, route);
    request.exchange = ex;
    let pending;
    try {
      pending = runners.request(ex, deps);
    } catch (error) {
      return done(error as Error);
    }
    if (pending) pending.then(() => done(), done);
    else done();
  };
}

/** The route handler: the pipeline's `body` phase, the operation, then its response. */
function operationRunner(route: RouteDefinition, runners: PhaseRunners, deps: RestDeps) {
  const handler = deps.handlers[route.operationId] as unknown as Handler<never>;
  return (request: FastifyRequest, reply: FastifyReply) => {
    const ex = request.exchange!;
    mergeBracketExpand(ex.query);
    ex.body = request.body;
    const pending = runners.body(ex, deps);
    // Nothing returned when the response was sent at once: Fastify waits only for a promise.
    return pending ? pending.then(() => operate(handler, ex, deps, request, reply)) : operate(handler, ex, deps, request, reply);
  };
}

/** Runs the operation and sends its response: at once when the handler waits for nothing, else a promise. */
function operate(handler: Handler<never>, ex: RestExchange, deps: RestDeps, request: FastifyRequest, reply: FastifyReply): MaybePromise<void> {
  const input = { params: ex.params, query: ex.query, body: ex.body } as never;
  const context = { principal: ex.principal, resource: ex.resource, deps: deps.operations, loaders: new ResourceLoaders(deps.operations) };
  const result = runIdempotent(deps.operations.db, deps.idempotencyHashKey, ex, () => handler(input, context) as MaybePromise<HandlerResponse>);
  return thenMaybe(result, (response) => respond(ex, deps, request, reply, response));
}

function respond(ex: RestExchange, deps: RestDeps, request: FastifyRequest, reply: FastifyReply, result: HandlerResponse & { replayed?: boolean }): void {
  if (result.replayed) reply.header('idempotent-replayed', 'true');
  if (ex.method !== 'GET' && ex.method !== 'HEAD') {
    const tag = deps.representations.written(ex.route, result);
    if (tag !== null) reply.header('etag', tag);
  }
  const next = (result.body as { page?: { next?: string | null } } | undefined)?.page?.next;
  if (typeof next === 'string') reply.header('link', nextLink(request.url, next));
  sendRepresentation(ex, reply, result);
}

/** `expand[]=author` is accepted as a synonym of `expand=author`. */
export function mergeBracketExpand(query: Record<string, unknown>): void {
  if (!query || !('expand[]' in query)) return;
  const bracket = query['expand[]'];
  const plain = query.expand;
  query.expand = [...toArray(plain), ...toArray(bracket)];
  delete query['expand[]'];
}

function toArray(value: unknown): unknown[] {
  return value === undefined ? [] : Array.isArray(value) ? value : [value];
}
