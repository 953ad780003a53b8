// First: before anything large is loaded (see the module).
import './tick-queue-shapes.js';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import cluster from 'node:cluster';
import fs from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { policy } from '../generated/policy.js';
import { routes } from '../generated/routes.js';
import { bootstrapIfEmpty, type BootstrapResult } from './bootstrap/first-start.js';
import { ConfigError, developmentDefaultWarning, type Config } from './config/config.js';
import { registerApiReference } from './docs/api-reference.js';
import { registerGraphiql } from './docs/graphiql.js';
import { renderOAuthError } from './errors/oauth-renderer.js';
import { ApiError } from './errors/registry.js';
import { capConnectionsPerAddress, clientErrorHandler, rawErrorResponse } from './http/connection-guard.js';
import { Cors, isPreflight, preflightRefusal } from './http/cors.js';
import { trustProxyOption } from './http/trust-proxy.js';
import { closeIfBodyUnread } from './http/unread-body.js';
import { addressKey } from './limits/address-key.js';
import { RateLimiter, rateLimitHeaders } from './limits/rate-limit.js';
import { SignInThrottle } from './limits/sign-in-throttle.js';
import { passwordWork } from './oauth/passwords.js';
import { KeyStore } from './oauth/keys/key-store.js';
import { startKeyRotation } from './oauth/keys/rotation-schedule.js';
import { oauthMethodNotAllowed } from './oauth/endpoints/wrong-method.js';
import { registerOAuth } from './oauth/routes.js';
import { InvalidationFeed } from './oauth/tokens/invalidation-feed.js';
import { longestAccessToken } from './oauth/tokens/jwt-access-token.js';
import { USER_SCOPES } from './oauth/scopes.js';
import { newId } from './storage/ids.js';
import type { InvalidationKind } from './storage/invalidations.js';
import { TokenService } from './oauth/tokens/token-service.js';
import { RegisteredClients } from './oauth/registered-clients.js';
import { handlers } from './operations/index.js';
import type { HandlerTable, OperationDeps } from './operations/types.js';
import type { PolicyTable } from './policy/table.js';
import { resources, type ResourceRegistry } from './resources/registry.js';
import { AuditLog } from './audit/audit-log.js';
import { startCheckpointer } from './audit/checkpointer.js';
import { auditSigningKey } from './audit/checkpoints.js';
import { LazyChild, type ParentLogger } from './logging/lazy-child.js';
import { logDestination } from './logging/log-destination.js';
import { redactUrl } from './logging/redact-url.js';
import { startMaintenance } from './maintenance/purge-expired.js';
import { SubjectDirectory } from './pipeline/subject-directory.js';
import { authenticate } from './pipeline/authenticate.js';
import { AllowedMethods } from './rest/method-not-allowed.js';
import { idempotencyHashKey } from './rest/idempotency.js';
import { registerRest, restExchangeAnswered } from './rest/plugin.js';
import { DeprecatedUse } from './deprecations/deprecated-use.js';
import { GRAPHQL_PATH, registerGraphql } from './graphql/plugin.js';
import { TrustedDocuments } from './graphql/trusted-documents.js';
import { traceIdOf } from './http/trace-context.js';
import { Metrics } from './metrics/metrics.js';
import type { InProcessEventBus } from './events/event-bus.js';
import { shareAcrossProcesses } from './cluster/shared-state.js';
import { representationTagger } from './rest/representation.js';
import { sendRestError } from './rest/send-error.js';
import { replacementContracts } from './rest/validation.js';
import type { RouteDefinition } from './rest/route-definition.js';
import { PACKAGE_ROOT } from './package-root.js';
import { openDb, type Db } from './storage/dialect.js';
import { migrateToLatest } from './storage/migrate.js';
import type { Migration } from 'kysely';

export interface App {
  fastify: FastifyInstance;
  db: Db;
  tokens: TokenService;
  keys: KeyStore;
  audit: AuditLog;
  bootstrap: BootstrapResult | null;
  /** The resource events this instance's GraphQL subscribers listen to. */
  events: InProcessEventBus;
  /** Prometheus metrics (served on METRICS_PORT by main.ts). */
  metrics: Metrics;
  close(): Promise<void>;
}

/** Requests whose trace ids are held at once for their audit events (more in flight than that is unusual). */
const MAX_TRACED_REQUESTS = 10_000;

/** The probes: they record no audit event, so they are answered while the audit log is full. */
const UNAUDITED_PATHS: ReadonlySet<string> = new Set(['/healthz', '/readyz']);

/** How long /readyz waits for the database's answer before it answers 503. */
const READY_PROBE_TIMEOUT_MS = 2000;

function withTimeout<T>(pending: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([pending, timeout]).finally(() => clearTimeout(timer));
}

/** How long in-flight requests get to finish on shutdown before their connections are closed. */
export const SHUTDOWN_DRAIN_MS = 15_000;

/** What an app serves: the compiled contract, its handlers and resource modules, and their tables. */
export interface ServedApi {
  routes: readonly RouteDefinition[];
  policy: PolicyTable;
  handlers: HandlerTable;
  resources: ResourceRegistry;
  /** Migrations beyond the storage's own set (the tables of resource types the set does not have). */
  migrations: Readonly<Record<string, Migration>>;
}

/** The contract of this checkout, as codegen compiled it into generated/. */
export const GENERATED_API: ServedApi = { routes, policy, handlers, resources, migrations: {} };

export interface BuildOptions {
  /** Use this database instead of opening one from the configuration (tests). */
  db?: Db;
  /** Serve this API instead of GENERATED_API (a test that adds a resource type compiles its own). */
  api?: ServedApi;
  /** SHUTDOWN_DRAIN_MS, shorter (tests). */
  shutdownDrainMs?: number;
}

/** Every operation has its handler and every resource type its module, or the app does not start. */
function checkServedApi(api: ServedApi): void {
  const unhandled = api.routes.filter((route) => typeof api.handlers[route.operationId] !== 'function').map((route) => route.operationId);
  if (unhandled.length > 0) throw new Error(`no handler for ${unhandled.join(', ')}`);
  api.resources.check(api.policy);
}

const PUBLISHED_SPEC = path.join(PACKAGE_ROOT, 'generated/openapi.json');
const GRAPHQL_SDL = path.join(PACKAGE_ROOT, 'schema.graphql');

/** GRAPHQL_INTROSPECTION_PUBLIC opens the SDL (`GET /v1/graphql`) like introspection. */
function publishSchemaRoute(route: RouteDefinition): RouteDefinition {
  if (route.operationId !== 'getGraphqlSchema') return route;
  return { ...route, access: { ...route.access, public: true, scopes: [], permission: null } };
}

/** How many Host fields a request carries (Node keeps only the first in `headers`). */
function hostFields(rawHeaders: readonly string[]): number {
  let count = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) if (rawHeaders[i]!.length === 4 && rawHeaders[i]!.toLowerCase() === 'host') count++;
  return count;
}

/** RFC 9110 §7.8: Upgrade named in Connection, which Node hands to its 'upgrade' listeners with the socket. */
function asksForUpgrade(headers: FastifyRequest['headers']): boolean {
  return headers.upgrade !== undefined && /(?:^|,)\s*upgrade\s*(?:,|$)/i.test(String(headers.connection ?? ''));
}

/**
 * Headers on every answer, errors included: no MIME sniffing of JSON, and, when the server is reached over
 * https, HSTS (RFC 6797) so that a browser never sends a token over plain http to it again.
 */
export function securityHeaders(issuer: string): Readonly<Record<string, string>> {
  return {
    'x-content-type-options': 'nosniff',
    ...(issuer.startsWith('https://') ? { 'strict-transport-security': 'max-age=31536000; includeSubDomains' } : {}),
  };
}

/** The request id and the security headers (`[name, value]` pairs, listed once: set on every response). */
function setCommonHeaders(requestId: string, reply: FastifyReply, security: readonly (readonly [string, string])[]): void {
  reply.header('x-request-id', requestId);
  for (const [name, value] of security) reply.header(name, value);
}

/** Wiring only: storage, token service, policy, the REST pipeline, the authorization server, health. */
export async function buildApp(config: Config, options: BuildOptions = {}): Promise<App> {
  const api = options.api ?? GENERATED_API;
  checkServedApi(api);
  const { policy } = api;
  // The server must take the tokens it issues: refused at start, before anything is written, rather than at
  // every request of the longest ones.
  const longest = await longestAccessToken(config.issuer, [...Object.keys(policy.scopes), ...USER_SCOPES], newId());
  if (longest > config.tokens.maxTokenLength) {
    throw new ConfigError([
      `MAX_TOKEN_LENGTH must be at least ${longest}: this server's access tokens (this ISSUER, the contract's scopes, client ids of up to 128 characters) can be that long; got ${config.tokens.maxTokenLength}`,
    ]);
  }
  const security = securityHeaders(config.issuer);
  const securityFields = Object.entries(security);
  let closing = false;
  // The W3C trace ids of the requests running now whose callers sent a `traceparent`, by request id: their
  // log lines and audit events carry it. An entry goes once its request is answered or aborted (on the next
  // turn: decisions are recorded as the response completes), so the map holds at most the requests in flight.
  const traces = new Map<string, string>();
  const forgetTrace = (requestId: string) => {
    if (traces.size > 0 && traces.has(requestId)) setImmediate(() => traces.delete(requestId));
  };
  const fastify = Fastify({
    logger: {
      level: config.logLevel,
      // Secrets never reach the log: no Authorization header, cookies or bodies are logged.
      redact: ['req.headers.authorization', 'req.headers.cookie', 'res.headers["set-cookie"]'],
      serializers: {
        // Fastify's request fields, with credential-like query parameters masked in the URL.
        req: (request: FastifyRequest) => ({
          method: request.method,
          url: redactUrl(request.url),
          host: request.host,
          remoteAddress: request.ip,
          remotePort: request.socket?.remotePort,
        }),
      },
      stream: logDestination(),
    },
    bodyLimit: config.http.bodyLimit,
    // A request must arrive whole — line, headers and body — within REQUEST_TIMEOUT_SECONDS (408), its headers
    // within at most 10 s of them; Node checks every second instead of every 30 s, so a slow body is cut
    // off near its deadline.
    requestTimeout: config.http.requestTimeoutSeconds * 1000,
    http: {
      headersTimeout: Math.min(10, config.http.requestTimeoutSeconds) * 1000,
      requestTimeout: config.http.requestTimeoutSeconds * 1000,
      connectionsCheckingInterval: 1000,
      requireHostHeader: false,
    },
    clientErrorHandler: clientErrorHandler(security),
    trustProxy: trustProxyOption(config.http.trustProxy),
    // A caller's W3C `traceparent` is read here, once per request, before Fastify makes the request's logger.
    genReqId(rawRequest) {
      const requestId = randomUUID();
      const traceId = traceIdOf(rawRequest.headers.traceparent);
      if (traceId !== null) {
        // A hijacked request (the WebSocket upgrade) has no onResponse: the map is capped, oldest out.
        if (traces.size >= MAX_TRACED_REQUESTS) traces.delete(traces.keys().next().value!);
        traces.set(requestId, traceId);
      }
      return requestId;
    },
    // While closing, new requests on open connections are refused by the hook below, in the API's shape.
    return503OnClosing: false,
    forceCloseConnections: 'idle',
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 200 },
    // URLs the router cannot even parse (bad percent-encoding, an over-long path segment) get the API's
    // error shape like every other refusal.
    frameworkErrors(error, request, reply) {
      setCommonHeaders(request.id, reply as unknown as FastifyReply, securityFields);
      // Answered before routing, so no onResponse hook runs: counted (an unmatched request) and its trace
      // id forgotten here instead.
      reply.raw.once('close', () => answered(request as unknown as FastifyRequest, reply as unknown as FastifyReply, 'other', 'unmatched'));
      const badUrl = error.code === 'FST_ERR_BAD_URL' || error.code === 'FST_ERR_MAX_PARAM_LENGTH';
      void sendRestError(
        reply as unknown as FastifyReply,
        badUrl ? new ApiError('VALIDATION_FAILED', 'The request URL is not valid: bad percent-encoding or a path segment over 200 characters.') : error,
      );
    },
  });
  // Each request's log lines carry its id (`reqId`) and, when the caller sent a W3C `traceparent`, its trace id
  // (`traceId`), so that a request is found in this log from a trace and the other way round. Fastify makes
  // each request's logger with the root logger's `child`, before any hook runs; a `childLoggerFactory` would
  // do the same but has Fastify check every logger it returns, method by method, on every request.
  // The child is made only once the request logs a line its level lets through (logging/lazy-child.ts).
  const childOf = fastify.log.child;
  fastify.log.child = function child(this: typeof fastify.log, bindings, options) {
    const traceId = traces.size === 0 || typeof bindings.reqId !== 'string' ? undefined : traces.get(bindings.reqId);
    const make = () => childOf.call(this, traceId === undefined ? bindings : { ...bindings, traceId }, options);
    // A child with a level or serializers of its own (a route's logLevel) is made at once, as pino makes it.
    if (options?.level !== undefined || options?.serializers !== undefined) return make();
    return LazyChild.logger(this as unknown as ParentLogger, make) as ReturnType<typeof childOf>;
  };
  // CONNECT (a proxy's method) reaches Node's 'connect' event, not Fastify: without a listener the socket is
  // dropped without an answer.
  fastify.server.on('connect', (_request, socket: import('node:net').Socket) => {
    socket.end(rawErrorResponse('METHOD_NOT_ALLOWED', security));
  });
  // RFC 9110 §10.1.1: an expectation other than 100-continue may be refused with 417 or ignored. Node refuses
  // it with an empty body; ignored, the request is answered as it would be without the field.
  fastify.server.on('checkExpectation', (request, response) => fastify.server.emit('request', request, response));
  // Behind proxies, they hold the connections: one cap per proxy address would cap every client together.
  // With WORKERS > 1 each worker sees only the connections the primary hands it, in turn, so each enforces
  // its share: one address holds about the cap across the workers (at most WORKERS - 1 more), not the cap
  // in each of them.
  if (config.http.trustProxy === false && config.http.maxConnectionsPerAddress > 0) {
    const share = cluster.isWorker ? Math.ceil(config.http.maxConnectionsPerAddress / config.workers) : config.http.maxConnectionsPerAddress;
    capConnectionsPerAddress(fastify.server, share, security);
  }
  for (const name of config.developmentDefaults) {
    fastify.log.warn(developmentDefaultWarning(config, name));
  }

  const db =
    options.db ??
    (await openDb({
      databaseUrl: config.databaseUrl,
      poolSize: config.databasePoolSize,
      dataDir: config.dataDir,
      backgroundCheckpoints: true,
      onCheckpointError: (message) => fastify.log.error({ err: { message } }, 'storage.checkpoint_failed'),
      onCheckpointSlowHold: (hold) => fastify.log.warn(hold, 'storage.checkpoint_held_write_lock'),
    }));
  await migrateToLatest(db, api.migrations);
  const apiScopes = Object.keys(policy.scopes);
  const bootstrap = await bootstrapIfEmpty(db, config, apiScopes);
  if (bootstrap) fastify.log.info({ file: bootstrap.file, clientId: bootstrap.clientId }, 'bootstrap.created');

  const keys = await KeyStore.open(db, config);
  const keyRotation = startKeyRotation(keys, fastify.log);
  // Hashing is per process, like libuv's thread pool it runs on.
  passwordWork.concurrency = config.passwordHashConcurrency;
  const metrics = new Metrics(() => audit.pendingCount);
  const tokens = new TokenService({ db, config, keys, onIssued: (grantType) => metrics.tokenIssued(grantType) });
  const subjects = new SubjectDirectory(db.kysely);
  const clients = new RegisteredClients(db.kysely);
  // What this process cached about a changed token, user or client (storage/invalidations.ts says which).
  const forgetCached = (kind: InvalidationKind, target: string): void => {
    if (kind === 'token') {
      tokens.evictJti(target);
      return;
    }
    if (kind === 'grant') {
      tokens.evictGrant(target);
      return;
    }
    subjects.forget(target);
    if (kind === 'user') tokens.evictSubject(target, 'user');
    else {
      clients.forget(target);
      tokens.evictClient(target);
    }
  };
  const shared = shareAcrossProcesses(config, fastify.log, (direction) => metrics.invalidationNotice(direction));
  // Revocations, deactivations, deletions, role and scope changes made by any process on this database.
  const invalidations = new InvalidationFeed(
    db.kysely,
    {
      apply(events) {
        for (const { kind, target } of events) forgetCached(kind, target);
      },
      reset() {
        subjects.clear();
        clients.clear();
        tokens.evictWhere(() => true);
      },
    },
    { onError: (error) => fastify.log.error({ err: error }, 'invalidations.read_failed'), announce: shared.announceInvalidations },
  );
  await invalidations.start();
  const stopFollowingWrites = shared.followInvalidations(invalidations);
  const audit = new AuditLog(db, fastify.log, {
    failureWindowMs: config.audit.failureWindowSeconds * 1000,
    maxPending: config.audit.maxPending,
    traceOf: (requestId) => (traces.size === 0 ? null : (traces.get(requestId) ?? null)),
    observe: (decision) => metrics.decision(decision.interface, decision.decision, decision.reason),
  });
  const maintenance = startMaintenance(db, fastify.log);
  const auditKey = await auditSigningKey(db.kysely, config.keyEncryptionSecret, config.previousKeyEncryptionSecret);
  const checkpointer = startCheckpointer(db.kysely, auditKey, audit, fastify.log, config.audit.checkpointSeconds * 1000);
  const limiter = new RateLimiter(config.rateLimit, (policy) => metrics.rateLimited(policy), shared.limiterStore);

  const published = JSON.parse(fs.readFileSync(PUBLISHED_SPEC, 'utf8')) as Record<string, unknown>;
  published.servers = [{ url: config.issuer, description: 'This server' }];
  // Resource events for GraphQL subscribers on this process and, through the fanout, on the others.
  const events = shared.events;
  const operations: OperationDeps = {
    events,
    db: db.kysely,
    sqlite: db.sqlite,
    policy,
    resources: api.resources,
    publishedSpec: JSON.stringify(published),
    graphqlSdl: fs.readFileSync(GRAPHQL_SDL, 'utf8'),
    defaultAccessTokenTtl: config.tokens.accessTokenTtl,
    replacement: replacementContracts(api.routes),
    invalidateSubject(subject) {
      // What the invalidation feed does for every process, done at once for this one.
      forgetCached('user', subject);
      forgetCached('client', subject);
    },
  };

  // CORS only when CORS_ORIGINS lists origins; its paths are listed in http/cors.ts, not per route.
  const cors = config.cors.origins.length > 0 ? new Cors(config.cors.origins) : null;
  if (cors) fastify.addHook('onSend', cors.onSend);
  // Set when the request arrives, so every response carries them, errors included.
  const allowedMethods = new AllowedMethods();
  fastify.addHook('onRoute', (route) => {
    // A route that serves only a WebSocket upgrade (GET /graphql) is not a method to offer in `Allow`.
    if (route.config?.upgradeOnly) return;
    allowedMethods.add(route.method, route.url);
  });
  // Every answer, by interface and operation (the contract's operationId, `graphql`, the authorization
  // server's route, or `unmatched`: a bounded label whatever the path); then its trace id can go.
  const answered = (request: FastifyRequest, reply: FastifyReply, iface: string, operation: string): void => {
    metrics.request(iface, operation, reply.statusCode, reply.elapsedTime / 1000);
    forgetTrace(request.id);
  };
  fastify.addHook('onResponse', (request, reply, done) => {
    // A REST request that reached its route's pipeline names its operation on its exchange, and its decision
    // is recorded now; others are told apart by their route (read once: Fastify builds routeOptions anew on
    // every read).
    const exchange = request.exchange;
    if (exchange) {
      answered(request, reply, 'rest', exchange.operationId);
      restExchangeAnswered(exchange, reply.statusCode, pipeline);
    } else {
      const options = request.routeOptions;
      const route = options.config?.route;
      const url = options.url;
      let iface = 'other';
      let operation = url ?? 'unmatched';
      if (route) [iface, operation] = ['rest', route.operationId];
      else if (url === GRAPHQL_PATH) [iface, operation] = ['graphql', 'graphql'];
      else if (url !== undefined && (url.startsWith('/oauth/') || url.startsWith('/.well-known/'))) iface = 'oauth';
      answered(request, reply, iface, operation);
    }
    // An upgrade request answered over HTTP before @fastify/websocket's own hooks ran (refused by the hook
    // below): Node handed its socket over for the upgrade, so nothing else would ever close it, and a
    // half-open socket would hold the server's close.
    if (asksForUpgrade(request.headers)) request.raw.socket.end(() => request.raw.socket.destroy());
    done();
  });
  // Every error any interface's error handler answers (an OAuth 429 or an audit-full 503 from an onRequest
  // hook, say) may come before the request's body arrived: such an answer ends the connection.
  fastify.addHook('onError', (_request, reply, _error, done) => {
    closeIfBodyUnread(reply);
    done();
  });
  fastify.addHook('onRequest', (request, reply, done) => {
    setCommonHeaders(request.id, reply, securityFields);
    // An aborted request has no onResponse either: a traced one's entry goes when its response closes
    // (answered or not; the request's own `close` comes as soon as its body is read). Only traced requests
    // pay for the listener.
    if (traces.size > 0 && traces.has(request.id)) {
      const requestId = request.id;
      reply.raw.once('close', () => forgetTrace(requestId));
    }
    // RFC 9112 §3.2: an HTTP/1.1 request without Host, or with two, is a 400 — answered here, in the API's
    // shape, since Node's own refusal (requireHostHeader) is an empty body and it keeps the first of two.
    if (request.raw.httpVersion === '1.1' && hostFields(request.raw.rawHeaders) !== 1) {
      void sendRestError(reply, new ApiError('VALIDATION_FAILED', 'An HTTP/1.1 request needs exactly one Host header.'));
      return;
    }
    if (closing) {
      reply.header('connection', 'close');
      void sendRestError(reply, new ApiError('UNAVAILABLE', 'The server is shutting down; retry.', { headers: { 'retry-after': '1' } }));
      return;
    }
    // Audit events that cannot be written wait in memory up to a bound; at the bound, requests are refused
    // rather than events dropped (audit-log.ts). Only the probes record nothing. The route's own error
    // handler answers, in its interface's shape (REST, GraphQL, OAuth).
    if (audit.full && !UNAUDITED_PATHS.has(request.routeOptions.url ?? '')) {
      done(new ApiError('UNAVAILABLE', 'The audit log cannot be written at the moment; retry.'));
      return;
    }
    done();
  });

  const restRoutes = config.graphql.introspectionPublic ? api.routes.map(publishSchemaRoute) : api.routes;
  // Uses of deprecated operations and fields, per client, for GET /v1/deprecations.
  const deprecatedUse = new DeprecatedUse(
    db.kysely,
    (error) => fastify.log.error({ err: error }, 'deprecations.write_failed'),
    (iface, name) => metrics.deprecatedUse(iface, name),
  );
  // What both APIs' pipelines decide and record with.
  const pipeline = { audit, policy, tokens, subjects, limiter, operations, deprecatedUse };
  await registerRest(fastify, {
    ...pipeline,
    routes: restRoutes,
    handlers: api.handlers,
    representations: representationTagger(restRoutes),
    idempotencyHashKey: idempotencyHashKey(config.keyEncryptionSecret),
  });
  await registerGraphql(fastify, {
    ...pipeline,
    sdl: operations.graphqlSdl,
    routes: restRoutes,
    limits: config.graphql.limits,
    trustedDocuments: config.graphql.trustedDocuments === null ? null : TrustedDocuments.load(config.graphql.trustedDocuments),
    introspectionPublic: config.graphql.introspectionPublic,
    events,
    maxMessageBytes: config.http.bodyLimit,
  });
  await registerOAuth(fastify, {
    db,
    clients,
    audit,
    config,
    keys,
    tokens,
    scopes: apiScopes,
    limiter,
    throttle: new SignInThrottle(shared.limiterStore),
    scopeDescriptions: policy.scopes,
    forgetUser: (userId) => forgetCached('user', userId),
    authenticateBearer: async (authorization) => authenticate({ authorization, tokenInQuery: false }, { tokens, subjects }),
  });

  await registerApiReference(fastify, limiter.anonymous, { graphiql: config.graphql.graphiql });
  if (config.graphql.graphiql) await registerGraphiql(fastify, limiter.anonymous);

  fastify.get('/healthz', async (_request, reply) => reply.header('cache-control', 'no-store').send({ status: 'ok' }));
  fastify.get('/readyz', async (_request, reply) => {
    try {
      // A database that stopped answering (frozen, cut off by the network) is not ready either: the load
      // balancer's probe gets its 503 in time instead of waiting on it.
      await withTimeout(db.ping(), READY_PROBE_TIMEOUT_MS);
    } catch {
      return sendRestError(reply, new ApiError('UNAVAILABLE', 'The database is not reachable.'));
    }
    // Reachable again, but the events of the outage are not all written yet: requests are still refused.
    if (audit.full) return sendRestError(reply, new ApiError('UNAVAILABLE', 'The audit log cannot be written at the moment.'));
    return reply.header('cache-control', 'no-store').send({ status: 'ready' });
  });

  fastify.setNotFoundHandler(async (request, reply) => {
    // Probing for paths counts against the caller's address like any anonymous request.
    const limit = await limiter.anonymous.consume(addressKey(request.ip));
    reply.headers(rateLimitHeaders(limit));
    const urlPath = request.url.split('?', 1)[0]!;
    const allow = allowedMethods.for(urlPath);
    // No route has OPTIONS: a CORS preflight lands here, spending the address's anonymous budget only.
    const preflight = limit.allowed && cors ? cors.preflight(request, allow) : null;
    if (preflight) return reply.code(204).headers(preflight).send();
    const oauthError = limit.allowed && !isPreflight(request) ? oauthMethodNotAllowed(urlPath, allow) : null;
    if (oauthError) {
      const rendered = renderOAuthError(oauthError);
      return reply.code(rendered.status).headers(rendered.headers).send(rendered.body);
    }
    const error = !limit.allowed
      ? new ApiError('RATE_LIMITED', `Too many requests; retry in ${limit.resetSeconds} s.`, { headers: { 'retry-after': String(limit.resetSeconds) } })
      : allow.length > 0 && isPreflight(request)
        ? new ApiError('FORBIDDEN', preflightRefusal(request, cors))
      : allow.length > 0
        ? new ApiError('METHOD_NOT_ALLOWED', `${request.method} is not allowed here; use ${allow.join(', ')}.`, {
            headers: { allow: allow.join(', ') },
          })
        : new ApiError('NOT_FOUND', 'There is no such endpoint.');
    return sendRestError(reply, error);
  });
  fastify.setErrorHandler(async (error, _request, reply) => sendRestError(reply, error));

  await fastify.ready();
  return {
    fastify,
    db,
    tokens,
    keys,
    audit,
    bootstrap,
    events,
    metrics,
    async close() {
      // Stop taking requests and drain in-flight ones, then flush the audit log, then the database. A
      // request still running after SHUTDOWN_DRAIN_MS has its connection closed: one stuck request (or a
      // client that never reads its answer) must not hold the shutdown.
      closing = true;
      const deadline = setTimeout(() => fastify.server.closeAllConnections(), options.shutdownDrainMs ?? SHUTDOWN_DRAIN_MS);
      // Node keeps a connection open after its last answer (keep-alive) while the server closes: each is
      // closed once it is idle, so that a drained server stops then, not at the deadline.
      const idle = setInterval(() => fastify.server.closeIdleConnections(), 100);
      await fastify.close();
      clearInterval(idle);
      clearTimeout(deadline);
      stopFollowingWrites();
      await invalidations.stop();
      await shared.close();
      await maintenance.stop();
      await keyRotation.stop();
      await audit.close();
      await deprecatedUse.close();
      await checkpointer.stop();
      if (!options.db) await db.close();
    },
  };
}
