import type { FastifyInstance, FastifyReply, FastifyRequest, RouteHandlerMethod, RouteOptions } from 'fastify';
import { execute, getOperationAST, GraphQLError, Kind, validate, type DocumentNode, type OperationDefinitionNode, type SelectionSetNode } from 'graphql';
import fastifyWebsocket from '@fastify/websocket';
import mercurius from 'mercurius';
import { ApiError, ERROR_CODES, UNAVAILABLE_RETRY_AFTER_SECONDS } from '../errors/registry.js';
import { isRefusal, toApiError } from '../errors/rest-renderer.js';
import { rateLimitHeaders } from '../limits/rate-limit.js';
import { checkAffordable, checkBatchSize, checkDocumentLimits, LimitExceededError, parseWithinLimits, type GraphqlLimits } from '../limits/graphql-limits.js';
import { compileStages, type Stage } from '../pipeline/pipeline.js';
import { recordDecision } from '../pipeline/record-decision.js';
import { authorizeOperation, chargeCaller, identify, largestCharge, limit, limitAddress } from '../pipeline/stages.js';
import { ANONYMOUS } from '../policy/principal.js';
import type { OperationAccess } from '../policy/table.js';
import { ReadableCounts } from '../resources/counts.js';
import { ResourceLoaders } from '../resources/loaders.js';
import { fromFastifyError } from '../rest/error-response.js';
import { parseJsonBody } from '../rest/json-body.js';
import type { RouteDefinition } from '../rest/route-definition.js';
import type { GraphqlContext } from './context.js';
import type { GraphqlDeps } from './graphql-deps.js';
import type { GraphqlExchange } from './graphql-exchange.js';
import { deprecatedFieldsOf } from './deprecated-fields.js';
import { fieldsMissingResolvers } from './relation-resolvers.js';
import { resolvers } from './resolvers.js';
import { CompiledQueries } from './compiled-queries.js';
import { subscriptionHandler } from './subscriptions/websocket.js';
import { PersistedQueryNotFoundError } from './trusted-documents.js';
import { fieldError, requestError, type GraphqlErrorBody } from './errors.js';

export interface GraphqlPluginDeps extends Omit<GraphqlDeps, 'rootFields' | 'bodySchemaOf'> {
  /** Largest WebSocket message accepted (BODY_LIMIT, as for a POST body). */
  maxMessageBytes: number;
  /** The served schema (schema.graphql). */
  sdl: string;
  /** The REST routes: a mutation validates its input with its REST twin's body schema. */
  routes: readonly RouteDefinition[];
}

export const GRAPHQL_PATH = '/graphql';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route serves only a WebSocket upgrade; its method is not offered in `Allow`. */
    upgradeOnly?: boolean;
  }
}

/** The GraphQL-over-HTTP media type; `application/json` is answered for clients that ask for it (or anything). */
const GRAPHQL_RESPONSE = 'application/graphql-response+json';

/** The pipeline's access stages that run once per request; each root field is then authorized on its own. */
export const REQUEST_STAGES: readonly Stage<GraphqlExchange, GraphqlDeps>[] = [
  { name: 'limit-address', run: limitAddress },
  { name: 'authenticate', run: identify },
  { name: 'rate-limit', run: limit },
];

const runRequestStages = compileStages(REQUEST_STAGES);

/** The REST operation a root field runs, for the resource it checks when its own `@auth` names none. */
const REST_TWINS: Readonly<Record<string, string>> = { 'Mutation.createComment': 'createComment', 'Subscription.commentAdded': 'listPostComments' };

/**
 * `POST /graphql`, executed by Mercurius on the same pipeline as REST:
 *
 *   limit-address -> authenticate -> rate-limit -> (trusted document) -> parse within the token limit
 *   -> depth, cost, alias, directive limits -> introspection scope -> anonymous caller refused (401)
 *   -> execute: each root field authorized (scope, role, resource) -> audit per root field
 *
 * Only POST (GET answers 405 with `Allow: POST`), only JSON bodies: a form or text/plain body, which a page
 * on another site could send without a preflight, is refused with 415 (CSRF). A request that fails as a
 * whole gets a 4xx with `errors` and no `data`; a partial result is 200 with both.
 */
export async function registerGraphql(app: FastifyInstance, pluginDeps: GraphqlPluginDeps): Promise<void> {
  const deps: GraphqlDeps = { ...pluginDeps, rootFields: rootFieldAccess(pluginDeps), bodySchemaOf: bodySchemas(pluginDeps.routes) };
  const introspection = pluginDeps.policy.operations['rest:getGraphqlSchema'];
  if (!introspection) throw new Error('The contract has no getGraphqlSchema operation to take the introspection rule from');
  const introspectionAccess: OperationAccess = deps.introspectionPublic ? { ...introspection, public: true } : introspection;

  await app.register(async (scope) => {
    const { Subscription, ...executed } = resolvers;
    // Mercurius builds the executable schema from the SDL and the resolvers; this adapter serves it: its
    // routes are off, documents are parsed, limited, validated and cached here, and queries run compiled by
    // graphql-jit, Mercurius' own compiler (compiled-queries.ts).
    await scope.register(mercurius, {
      schema: pluginDeps.sdl,
      resolvers: executed as never,
      routes: false,
      graphiql: false,
      allowBatchedQueries: false,
    });
    const schema = scope.graphql.schema;
    const unresolved = fieldsMissingResolvers(schema);
    if (unresolved.length > 0) {
      throw new Error(`These GraphQL fields lead to a resource and have no resolver in src/graphql/resolvers.ts (see Post.author): ${unresolved.join(', ')}`);
    }
    const documents = new DocumentCache();
    const queries = new CompiledQueries(schema);
    const prepared = new WeakMap<DocumentNode, Map<string, PreparedOperation>>();
    const validations = new WeakMap<DocumentNode, readonly GraphQLError[]>();
    /** The document's validation errors (none: valid), worked out once per parsed document. */
    const validated = (document: DocumentNode): readonly GraphQLError[] => {
      let errors = validations.get(document);
      if (!errors) validations.set(document, (errors = validate(schema, document)));
      return errors;
    };
    // Mercurius attaches subscription resolvers only when its own subscription server is on; graphql-ws
    // serves them here, from the same schema object.
    const subscriptionFields = schema.getSubscriptionType()?.getFields() ?? {};
    for (const [name, field] of Object.entries(Subscription ?? {})) {
      const target = subscriptionFields[name];
      if (!target) throw new Error(`schema.graphql has no Subscription.${name}`);
      const { subscribe, resolve } = field as { subscribe: unknown; resolve: unknown };
      Object.assign(target, { subscribe, resolve });
    }

    // Subscriptions: graphql-ws on the WebSocket upgrade of GET /graphql; a plain GET is 405.
    await scope.register(fastifyWebsocket, { options: { maxPayload: pluginDeps.maxMessageBytes } });
    const subscriptions = subscriptionHandler({ schema, deps, requestStages: REQUEST_STAGES, openExchange });
    scope.addHook('onClose', async () => subscriptions.close());
    const plainGet: RouteHandlerMethod = async (request, reply) =>
      sendFailure(reply, responseType(request), new ApiError('METHOD_NOT_ALLOWED', 'GET is not allowed here; use POST (subscriptions: a WebSocket upgrade).', { headers: { allow: 'POST' } }), null);
    scope.route({
      method: 'GET',
      url: GRAPHQL_PATH,
      // Not a method of this path for `Allow`: only its upgrade is served.
      config: { upgradeOnly: true },
      handler: plainGet,
      wsHandler: subscriptions.handler,
    } as RouteOptions);

    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('application/json', { parseAs: 'buffer' }, parseJsonBody);
    scope.setErrorHandler((error, request, reply) => sendFailure(reply, responseType(request), fromFastifyError(error), null));

    scope.post(GRAPHQL_PATH, async (request, reply) => {
      const type = responseType(request);
      if (type === null) return sendFailure(reply, GRAPHQL_RESPONSE, new ApiError('NOT_ACCEPTABLE', `Accept ${GRAPHQL_RESPONSE} or application/json.`), null);
      const ex = openExchange(request);
      try {
        const pending = runRequestStages(ex, deps);
        if (pending) await pending;
        const body = request.body;
        if (Array.isArray(body)) {
          checkBatchSize(body.length, deps.limits);
          const results = [];
          // Each operation weighs its own cost; the rate-limit stage's point stands for part of the first's.
          for (const [i, item] of body.entries()) results.push((await runOne(item, ex, request.log, i === 0 ? 1 : 0)).result);
          return send(reply, type, ex, 200, results);
        }
        checkBatchSize(1, deps.limits);
        const { status, result } = await runOne(body, ex, request.log, 1);
        return send(reply, type, ex, status, result);
      } catch (error) {
        if (ex.decision) recordDecision(ex, deps.audit);
        return sendFailure(reply, type, error, ex);
      }
    });

    /**
     * One operation of the request; a whole-request refusal throws, an executed one returns its status.
     * `charged`: the points of its cost already taken from the caller's budgets (by the rate-limit stage).
     */
    async function runOne(body: unknown, ex: GraphqlExchange, log: FastifyRequest['log'], charged: number): Promise<{ status: number; result: ExecutionBody }> {
      const params = readParams(body);
      const source = deps.trustedDocuments ? deps.trustedDocuments.resolve(params.query, params.extensions) : params.query;
      if (typeof source !== 'string') throw new ApiError('VALIDATION_FAILED', 'The body needs `query`, a string.');
      const document = documents.parse(source, deps.limits);
      const { operation, fields, cost } = prepareOperation(document, params);
      // The operation weighs its cost against the caller's budgets, before anything of it runs.
      checkAffordable(cost, largestCharge(ex, deps));
      if (cost > charged) await chargeCaller(ex, deps, cost - charged);
      if (fields.introspection) decideRequest(ex, introspectionAccess, `${rootTypeName(operation)}.__schema`);
      refuseAnonymous(ex, operation, fields.names);

      const context: Omit<GraphqlContext, 'deps'> & { deps: GraphqlDeps } = {
        principal: ex.principal,
        requestId: ex.requestId,
        loaders: new ResourceLoaders(deps.operations),
        counts: new ReadableCounts(deps.operations, ex.principal),
        exchange: ex,
        deps,
      };
      const invalid = validated(document);
      if (invalid.length > 0) throw new GraphqlRequestError(invalid.map((e) => requestError(e)));
      // Mutations run on graphql-js, never compiled: graphql-jit's serial execution runs the mutations after
      // a failed one and, when a later one's argument does not coerce, never settles the request. They are
      // few and each does a write; queries are where compiling pays.
      const execution =
        operation.operation === 'mutation'
          ? await execute({ schema, document, contextValue: context, variableValues: params.variables, operationName: params.operationName })
          : await queries.run(document, params.operationName, params.variables, context);
      const errors = execution.errors?.map((e) => fieldError(e, log)) ?? [];
      // Nothing executed (the variables did not coerce, found by a compiled document): a request error.
      if (execution.data == null && errors.length > 0 && errors.every((error) => error.path === undefined)) throw new GraphqlRequestError(errors);
      // It ran: each deprecated field it asked for is a use to count (its client must move on).
      for (const field of deprecatedFieldsOf(schema, document)) {
        deps.deprecatedUse.record(ex.principal.kind === 'anonymous' ? null : ex.principal.clientId, 'graphql', field);
      }
      const result: ExecutionBody = { data: execution.data ?? null };
      if (errors.length > 0) result.errors = errors;
      // Nothing resolved (a non-null root field failed): the request failed as a whole, with the first error's status.
      const status = execution.data == null && errors.length > 0 ? statusOf(errors[0]!) : 200;
      return { status, result };
    }

    /**
     * The operation the request runs, within the limits, and its root fields. A verdict that read no
     * variable is kept with the parsed document: a client's repeated document is measured once.
     */
    function prepareOperation(document: DocumentNode, params: RequestParams): PreparedOperation {
      const name = params.operationName ?? '';
      const known = prepared.get(document)?.get(name);
      if (known) return known;
      const { readVariables, cost } = checkDocumentLimits(schema, document, params.operationName, params.variables, deps.limits);
      const operation = getOperationAST(document, params.operationName);
      if (!operation) {
        const message = params.operationName ? `The document has no operation named "${params.operationName}".` : 'The document must name the operation to run (`operationName`).';
        throw new ApiError('VALIDATION_FAILED', message);
      }
      if (operation.operation === 'subscription') throw new ApiError('VALIDATION_FAILED', 'Subscriptions are not served over HTTP POST.');
      const operationOf: PreparedOperation = { operation, fields: rootFields(document, operation), cost };
      if (!readVariables) {
        // Bounded by the document cache (a document that leaves it is collected) and by its operations.
        const byName = prepared.get(document) ?? new Map<string, PreparedOperation>();
        byName.set(name, operationOf);
        prepared.set(document, byName);
      }
      return operationOf;
    }

    /** A request-level access decision (introspection), recorded like a root field's. */
    function decideRequest(ex: GraphqlExchange, access: OperationAccess, operationId: string): void {
      const decided: GraphqlExchange = { ...ex, operationId, access, resourceId: undefined, decision: null };
      try {
        authorizeOperation(decided, deps);
      } finally {
        recordDecision(decided, deps.audit);
      }
    }

    /** An anonymous caller asking for any protected root field gets 401 and no data, as REST would. */
    function refuseAnonymous(ex: GraphqlExchange, operation: OperationDefinitionNode, names: ReadonlySet<string>): void {
      if (ex.principal.kind !== 'anonymous') return;
      const root = rootTypeName(operation);
      for (const name of names) {
        const access = deps.rootFields.get(`${root}.${name}`);
        if (access && !access.public) decideRequest(ex, access, `${root}.${name}`);
      }
    }
  });
}

function rootTypeName(operation: OperationDefinitionNode): string {
  return operation.operation === 'query' ? 'Query' : operation.operation === 'mutation' ? 'Mutation' : 'Subscription';
}

/** Every root field's access rule by `Type.field`; a field whose rule names no resource takes its REST twin's. */
function rootFieldAccess(deps: Pick<GraphqlPluginDeps, 'policy' | 'routes'>): Map<string, OperationAccess> {
  const fields = new Map<string, OperationAccess>();
  for (const [id, access] of Object.entries(deps.policy.operations)) {
    if (!id.startsWith('graphql:')) continue;
    const field = id.slice('graphql:'.length);
    const twin = REST_TWINS[field];
    const twinResource = twin ? deps.routes.find((route) => route.operationId === twin)?.access.resource ?? null : null;
    fields.set(field, access.resource === null && twinResource !== null ? { ...access, resource: twinResource } : access);
  }
  return fields;
}

function bodySchemas(routes: readonly RouteDefinition[]): (operationId: string) => object | null {
  const schemas = new Map(routes.flatMap((route) => (route.schema.body ? [[route.operationId, route.schema.body as object] as const] : [])));
  return (operationId) => schemas.get(operationId) ?? null;
}

interface RequestParams {
  query: unknown;
  variables: Record<string, unknown> | null;
  operationName: string | null;
  extensions: unknown;
}

const PARAMS = new Set(['query', 'variables', 'operationName', 'extensions']);

/** The GraphQL-over-HTTP request parameters, each of its type; anything else in the body is refused. */
function readParams(body: unknown): RequestParams {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new ApiError('VALIDATION_FAILED', 'The body must be a JSON object with `query`.');
  const record = body as Record<string, unknown>;
  const unknown = Object.keys(record).find((key) => !PARAMS.has(key));
  if (unknown !== undefined) {
    throw new ApiError('VALIDATION_FAILED', 'The body has a property GraphQL over HTTP does not define.', { details: [{ path: `/body/${unknown}`, message: 'is not a known property' }] });
  }
  const { query, variables, operationName, extensions } = record;
  if (query !== undefined && query !== null && typeof query !== 'string') throw new ApiError('VALIDATION_FAILED', '`query` must be a string.');
  if (variables !== undefined && variables !== null && (typeof variables !== 'object' || Array.isArray(variables))) {
    throw new ApiError('VALIDATION_FAILED', '`variables` must be an object.');
  }
  if (operationName !== undefined && operationName !== null && typeof operationName !== 'string') throw new ApiError('VALIDATION_FAILED', '`operationName` must be a string.');
  if (extensions !== undefined && extensions !== null && (typeof extensions !== 'object' || Array.isArray(extensions))) {
    throw new ApiError('VALIDATION_FAILED', '`extensions` must be an object.');
  }
  return {
    query,
    variables: (variables as Record<string, unknown> | null | undefined) ?? null,
    operationName: (operationName as string | null | undefined) ?? null,
    extensions,
  };
}

/** Thrown for a document GraphQL refuses before execution (syntax, validation, variables): 400 with its errors. */
class GraphqlRequestError extends Error {
  constructor(readonly errors: GraphqlErrorBody[]) {
    super(errors[0]?.message ?? 'The document is not valid.');
  }
}

/** Documents parsed, by their text: a client sends the same few documents again and again. */
const PARSED_DOCUMENTS = 512;

class DocumentCache {
  readonly #parsed = new Map<string, DocumentNode>();

  /** Parsed within the token limit; a syntax error is the request's (400 VALIDATION_FAILED with its location). */
  parse(source: string, limits: GraphqlLimits): DocumentNode {
    const cached = this.#parsed.get(source);
    if (cached) return cached;
    let document: DocumentNode;
    try {
      document = parseWithinLimits(source, limits);
    } catch (error) {
      if (error instanceof GraphQLError) throw new GraphqlRequestError([requestError(error)]);
      throw error;
    }
    // Bounded: the oldest entry goes first (a Map keeps insertion order).
    if (this.#parsed.size >= PARSED_DOCUMENTS) this.#parsed.delete(this.#parsed.keys().next().value!);
    this.#parsed.set(source, document);
    return document;
  }
}

/** The root fields the operation selects (through fragments), and whether it asks for introspection. */
function rootFields(document: DocumentNode, operation: OperationDefinitionNode): { names: Set<string>; introspection: boolean } {
  const fragments = new Map(document.definitions.flatMap((d) => (d.kind === Kind.FRAGMENT_DEFINITION ? [[d.name.value, d.selectionSet] as const] : [])));
  const names = new Set<string>();
  let introspection = false;
  const seen = new Set<string>();
  const visit = (set: SelectionSetNode): void => {
    for (const selection of set.selections) {
      if (selection.kind === Kind.FIELD) {
        const name = selection.name.value;
        if (name === '__schema' || name === '__type') introspection = true;
        else if (!name.startsWith('__')) names.add(name);
      } else if (selection.kind === Kind.INLINE_FRAGMENT) visit(selection.selectionSet);
      else if (!seen.has(selection.name.value)) {
        seen.add(selection.name.value);
        const fragment = fragments.get(selection.name.value);
        if (fragment) visit(fragment);
      }
    }
  };
  visit(operation.selectionSet);
  return { names, introspection };
}

/** An operation of a parsed document that passed the limits, with its root fields. */
interface PreparedOperation {
  operation: OperationDefinitionNode;
  fields: { names: Set<string>; introspection: boolean };
  /** Rate-limit points: the cost its limits measured. */
  cost: number;
}

interface ExecutionBody {
  data: unknown;
  errors?: GraphqlErrorBody[];
}

function statusOf(error: GraphqlErrorBody): number {
  return (ERROR_CODES as Record<string, { status: number }>)[error.extensions.code]?.status ?? 400;
}

/** The request as the pipeline's exchange; each root field is decided on a copy of it. */
function openExchange(request: FastifyRequest, authorization: string | undefined = request.headers.authorization): GraphqlExchange {
  return {
    interface: 'graphql',
    operationId: 'graphql',
    access: NO_ACCESS,
    resourceId: undefined,
    credentials: { authorization, tokenInQuery: 'access_token' in (request.query as Record<string, unknown>) },
    requestId: request.id,
    sourceAddress: request.ip,
    principal: ANONYMOUS,
    resource: null,
    rateLimit: null,
    decision: null,
  };
}

/** The request's own rule, before a field is known: nothing is allowed by it (each field brings its own). */
const NO_ACCESS: OperationAccess = { id: 'graphql', public: false, authenticated: false, scopes: [], permission: null, resource: null, deprecated: false };

/** The media type to answer in, from Accept; null when the client accepts neither GraphQL's nor JSON. */
function responseType(request: FastifyRequest): string | null {
  const accept = request.headers.accept;
  if (accept === undefined || accept.trim() === '') return 'application/json';
  const types = accept.split(',').map((part) => part.split(';', 1)[0]!.trim().toLowerCase());
  if (types.includes(GRAPHQL_RESPONSE)) return GRAPHQL_RESPONSE;
  if (types.includes('application/json') || types.includes('application/*') || types.includes('*/*')) return 'application/json';
  return null;
}

function send(reply: FastifyReply, type: string, ex: GraphqlExchange, status: number, body: unknown): FastifyReply {
  if (ex.rateLimit) reply.headers(rateLimitHeaders(ex.rateLimit));
  // Nothing resolved because the database could not be reached: retry, as any UNAVAILABLE says.
  if (status === 503) reply.header('retry-after', String(UNAVAILABLE_RETRY_AFTER_SECONDS));
  return reply.code(status).header('cache-control', 'no-store').header('content-type', `${type}; charset=utf-8`).send(JSON.stringify(body));
}

/** A request refused as a whole: its status, the error's headers (a Bearer challenge, Retry-After), `errors` and no `data`. */
function sendFailure(reply: FastifyReply, type: string | null, error: unknown, ex: GraphqlExchange | null): FastifyReply {
  let status: number;
  let errors: GraphqlErrorBody[];
  if (error instanceof GraphqlRequestError) {
    status = 400;
    errors = error.errors;
  } else if (error instanceof LimitExceededError || error instanceof PersistedQueryNotFoundError) {
    status = 400;
    errors = [{ message: error.message, extensions: { code: error.code } }];
  } else {
    const api = toApiError(error);
    if (api.status >= 500 && !isRefusal(error)) reply.log.error({ err: error }, 'graphql request failed');
    status = api.status;
    reply.headers(api.headers);
    const body: GraphqlErrorBody = { message: api.message, extensions: { code: api.code } };
    if (api.details && api.details.length > 0) body.extensions.details = api.details;
    errors = [body];
  }
  if (ex?.rateLimit) reply.headers(rateLimitHeaders(ex.rateLimit));
  return reply
    .code(status)
    .header('cache-control', 'no-store')
    .header('content-type', `${type ?? GRAPHQL_RESPONSE}; charset=utf-8`)
    .send(JSON.stringify({ errors }));
}
