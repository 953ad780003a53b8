import type { FastifyRequest } from 'fastify';
import type { WebSocket } from '@fastify/websocket';
import {
  createSourceEventStream,
  execute,
  getOperationAST,
  GraphQLError,
  specifiedRules,
  validate,
  type ExecutionArgs,
  type ExecutionResult,
  type GraphQLSchema,
} from 'graphql';
import { makeHandler } from 'graphql-ws/use/@fastify/websocket';
import { ApiError } from '../../errors/registry.js';
import { checkAffordable, checkDocumentLimits, LimitExceededError, parseWithinLimits } from '../../limits/graphql-limits.js';
import { WindowCounters } from '../../limits/rate-limit.js';
import { authenticate } from '../../pipeline/authenticate.js';
import { runStages, type Stage } from '../../pipeline/pipeline.js';
import { recordDecision } from '../../pipeline/record-decision.js';
import { chargeCaller, largestCharge, limit, rateLimited } from '../../pipeline/stages.js';
import { ReadableCounts } from '../../resources/counts.js';
import { ResourceLoaders } from '../../resources/loaders.js';
import type { GraphqlContext } from '../context.js';
import { fieldError, withoutSuggestions } from '../errors.js';
import type { GraphqlDeps } from '../graphql-deps.js';
import type { GraphqlExchange } from '../graphql-exchange.js';
import { PersistedQueryNotFoundError } from '../trusted-documents.js';

/** Close code of graphql-ws for a refused connection: no token, a bad one, or one that stopped being valid. */
export const FORBIDDEN_CLOSE = 4403;
/** Close code when the connection's rate limit is spent at connection time (retry later). */
export const RATE_LIMITED_CLOSE = 4429;

/** Subscriptions one connection may hold open at once. */
export const MAX_SUBSCRIPTIONS_PER_CONNECTION = 10;
/** How often open connections' tokens are checked again (expiry, revocation, a deactivated user). */
export const RECHECK_INTERVAL_MS = 1000;
/** Time for the client's connection_init after the upgrade; then the socket is closed (graphql-ws 4408). */
const CONNECTION_INIT_TIMEOUT_MS = 3000;

interface Connection {
  exchange: GraphqlExchange;
  socket: WebSocket;
  /**
   * The ids of the subscriptions held, from the moment their `subscribe` is read until they complete: an
   * id in use (pending or running) is not taken again, and their number is capped.
   */
  ids: Set<string>;
  /** Their event streams, all ended when the socket closes. */
  streams: Set<EventResults>;
}

export interface SubscriptionServerOptions {
  schema: GraphQLSchema;
  deps: GraphqlDeps;
  /** The pipeline's per-request stages (address limit, authentication, rate limit), as POST runs them. */
  requestStages: readonly Stage<GraphqlExchange, GraphqlDeps>[];
  /** The request as the pipeline's exchange (the same as for POST /graphql). */
  openExchange(request: FastifyRequest, authorization: string | undefined): GraphqlExchange;
}

/**
 * Subscriptions over WebSocket with graphql-ws's own server (the graphql-transport-ws protocol, its close
 * codes) on the Fastify instance's `/graphql`, executing the same schema as POST:
 *
 * - The bearer token travels in `connection_init`'s payload (`{ "authorization": "Bearer ..." }`, or
 *   `{ "token": "..." }`), checked by the pipeline's authentication; none, or a bad one, closes with 4403.
 * - Each subscription document is held to the same limits as POST (and the trusted documents, when on);
 *   only subscription operations run here (queries and mutations: POST).
 * - The root field is authorized like any other (audited, interface `graphql`); each event is delivered
 *   only if the subscriber may read it then (resolvers.ts).
 * - Every RECHECK_INTERVAL_MS the open connections' tokens are authenticated again: an expired or revoked
 *   token, or a deactivated user, closes the socket with 4403.
 */
export function subscriptionHandler(options: SubscriptionServerOptions) {
  const { schema, deps } = options;
  const connections = new Map<WebSocket, Connection>();
  // What the events of each subscriber's subscriptions have spent this window (see `subscribe`).
  const eventBudgets = new WindowCounters(deps.limiter.client.windowSeconds * 1000);
  const connectionOf = new WeakMap<GraphqlContext, Connection>();
  /** A subscription's cost, by the context it began with: every event it delivers weighs it again. */
  const costOf = new WeakMap<GraphqlContext, number>();

  /**
   * A context for the connection's caller as of now (a role lowered since the subscription began is the
   * one that counts) with loaders of its own (an object read for an earlier event may have changed since).
   */
  function contextOf(connection: Connection): GraphqlContext {
    const { principal } = connection.exchange;
    const context: GraphqlContext = {
      principal,
      requestId: connection.exchange.requestId,
      loaders: new ResourceLoaders(deps.operations),
      counts: new ReadableCounts(deps.operations, principal),
      exchange: connection.exchange,
      deps,
    };
    connectionOf.set(context, connection);
    return context;
  }

  const recheck = setInterval(() => {
    for (const connection of connections.values()) {
      void stillAuthenticated(connection).then((valid) => {
        if (!valid) close(connection.socket, FORBIDDEN_CLOSE, 'Forbidden');
      });
    }
  }, RECHECK_INTERVAL_MS);
  recheck.unref();

  /** Authenticates the connection's token again; its principal follows (a changed role), its subject may not. */
  async function stillAuthenticated(connection: Connection): Promise<boolean> {
    try {
      const principal = await authenticate(connection.exchange.credentials, deps);
      const held = connection.exchange.principal;
      if (principal.kind === 'anonymous' || held.kind === 'anonymous' || principal.subject !== held.subject) return false;
      connection.exchange.principal = principal;
      return true;
    } catch {
      return false;
    }
  }

  const handler = makeHandler<Record<string, unknown>>(
    {
      schema,
      connectionInitWaitTimeout: CONNECTION_INIT_TIMEOUT_MS,
      async onConnect(ctx) {
        const { socket, request } = ctx.extra;
        const params = ctx.connectionParams ?? {};
        const authorization =
          typeof params.authorization === 'string' ? params.authorization : typeof params.token === 'string' ? `Bearer ${params.token}` : undefined;
        if (authorization === undefined) return false;
        const exchange = options.openExchange(request, authorization);
        try {
          const pending = runStages(options.requestStages, exchange, deps);
          if (pending) await pending;
        } catch (error) {
          if (exchange.decision) recordDecision(exchange, deps.audit);
          if (error instanceof ApiError && error.code === 'RATE_LIMITED') close(socket, RATE_LIMITED_CLOSE, 'Too many requests');
          return false;
        }
        if (exchange.principal.kind === 'anonymous') return false;
        connections.set(socket, { exchange, socket, ids: new Set(), streams: new Set() });
        return true;
      },
      async onClose(ctx) {
        const connection = connections.get(ctx.extra.socket);
        connections.delete(ctx.extra.socket);
        // Whatever graphql-ws no longer holds (a stream that lost its id's slot) ends here too.
        if (connection) await Promise.all([...connection.streams].map((stream) => stream.return()));
      },
      async onSubscribe(ctx, id, payload): Promise<ExecutionArgs | readonly GraphQLError[]> {
        const connection = connections.get(ctx.extra.socket);
        if (!connection) return [refusal('UNAUTHENTICATED', 'Authentication is required.')];
        // graphql-ws frees an id when the client completes it, even while its subscribe is still being
        // checked here: an id stays taken until its subscription has ended (graphql-transport-ws: 4409).
        if (connection.ids.has(id)) {
          close(connection.socket, 4409, `Subscriber for ${id} already exists`);
          return [refusal('VALIDATION_FAILED', `Subscriber for ${id} already exists.`)];
        }
        // A subscription's decisions are audited: while the audit log is full, none starts (app.ts).
        if (deps.audit.full) return [refusal('UNAVAILABLE', 'The audit log cannot be written at the moment; retry.')];
        if (connection.ids.size >= MAX_SUBSCRIPTIONS_PER_CONNECTION) {
          return [refusal('QUERY_TOO_COMPLEX', `At most ${MAX_SUBSCRIPTIONS_PER_CONNECTION} subscriptions per connection.`)];
        }
        // The slot is taken before the first await, so that frames read in one go cannot all pass the
        // check above; a refusal gives it back (onComplete does for a subscription that ran).
        connection.ids.add(id);
        let admitted = false;
        try {
          // Each subscription is a request against the caller's budget, as a POST would be.
          await limit(connection.exchange, deps);
          const source = deps.trustedDocuments ? deps.trustedDocuments.resolve(payload.query, payload.extensions) : payload.query;
          const document = parseWithinLimits(source, deps.limits);
          const { cost } = checkDocumentLimits(schema, document, payload.operationName, payload.variables, deps.limits);
          checkAffordable(cost, largestCharge(connection.exchange, deps));
          if (cost > 1) await chargeCaller(connection.exchange, deps, cost - 1);
          const operation = getOperationAST(document, payload.operationName);
          if (!operation) return [refusal('VALIDATION_FAILED', 'The document must name the operation to run (`operationName`).')];
          if (operation.operation !== 'subscription') return [refusal('VALIDATION_FAILED', 'Only subscriptions run over WebSocket; send queries and mutations with POST.')];
          const invalid = validate(schema, document, specifiedRules);
          if (invalid.length > 0) return invalid.map((error) => refusal('VALIDATION_FAILED', withoutSuggestions(error.message)));
          admitted = true;
          const contextValue = contextOf(connection);
          costOf.set(contextValue, cost);
          return { schema, document, operationName: payload.operationName, variableValues: payload.variables, contextValue };
        } catch (error) {
          if (error instanceof LimitExceededError || error instanceof PersistedQueryNotFoundError) return [refusal(error.code, error.message)];
          if (error instanceof ApiError) return [refusal(error.code, error.message)];
          if (error instanceof GraphQLError) return [refusal('VALIDATION_FAILED', withoutSuggestions(error.message))];
          throw error;
        } finally {
          if (!admitted) connection.ids.delete(id);
        }
      },
      async subscribe(args) {
        const connection = connectionOf.get(args.contextValue as GraphqlContext);
        if (!connection) throw new Error('A subscription without its connection');
        // Each event runs the whole document again, so it weighs the subscription's cost. Events happen
        // when others publish, so they are not charged to the caller's budgets: those pay for the caller's
        // own requests and, for the client's, its other users' too, and a publisher could spend them all.
        // The caller's subscriptions share a budget of events of their own instead, as large as the
        // caller's (the smallest it draws on) per window, so that opening more subscriptions does not buy
        // more events; a subscription whose event finds it spent ends with RATE_LIMITED. Counted in this
        // process: a subscription's events are executed in the process that holds its socket.
        const cost = costOf.get(args.contextValue as GraphqlContext) ?? 1;
        const principal = connection.exchange.principal;
        const subscriber = principal.kind === 'user' ? `user:${principal.subject}` : principal.kind === 'client' ? `client:${principal.clientId}` : '';
        const charge = eventBudget(eventBudgets, subscriber, largestCharge(connection.exchange, deps), cost);
        const result = await subscribeEvents(args, () => contextOf(connection), charge, (stream) => connection.streams.delete(stream));
        if (!(Symbol.asyncIterator in result)) return result;
        // A socket closed meanwhile has nobody to deliver to.
        if (!connections.has(connection.socket)) await result.return();
        else connection.streams.add(result);
        return result;
      },
      onComplete(ctx, id) {
        const connection = connections.get(ctx.extra.socket);
        connection?.ids.delete(id);
      },
      onNext(ctx, _id, _payload, _args, result) {
        if (!result.errors) return result;
        const errors = result.errors.map((error) => fieldError(error as GraphQLError, ctx.extra.request.log));
        return { ...result, errors } as never;
      },
      isProd: true,
    },
    12_000,
  );

  return {
    handler,
    /** Open connections (tests). */
    get connectionCount() {
      return connections.size;
    },
    close() {
      clearInterval(recheck);
      for (const connection of connections.values()) close(connection.socket, 1001, 'Server shutting down');
    },
  };
}

/**
 * A subscription's charge for each event: `cost` from the subscriber's event budget of `points` per window
 * (shared by the subscriber's subscriptions); throws RATE_LIMITED, as the caller's budgets do, for the event
 * that would overspend it.
 */
function eventBudget(budgets: WindowCounters, subscriber: string, points: number, cost: number): () => void {
  return () => {
    const spent = budgets.take(subscriber, cost);
    if (spent.points > points) throw rateLimited(Math.max(1, Math.ceil(spent.msLeft / 1000)));
  };
}

type EventResults = AsyncIterableIterator<ExecutionResult> & { return(): Promise<IteratorResult<ExecutionResult>> };

/**
 * graphql's `subscribe` with one difference: each event is executed with a context of its own (`fresh`),
 * not the one the subscription began with, so that every field of every event is decided for the
 * subscriber as they are when it happens. `ended` is told when the stream ends, however it ends.
 */
async function subscribeEvents(
  args: ExecutionArgs,
  fresh: () => GraphqlContext,
  charge: () => void,
  ended: (results: EventResults) => void,
): Promise<EventResults | ExecutionResult> {
  const stream = await createSourceEventStream(args);
  if (!(Symbol.asyncIterator in stream)) return stream;
  const events = stream as AsyncIterableIterator<unknown>;
  let refused = false;
  const results: EventResults = {
    async next() {
      const step = refused ? { done: true as const, value: undefined } : await events.next();
      if (step.done) {
        ended(results);
        if (refused) await events.return?.();
        return { done: true, value: undefined };
      }
      try {
        charge();
      } catch (error) {
        if (!(error instanceof ApiError) || error.code !== 'RATE_LIMITED') throw error;
        // This event is not delivered; the subscription ends after saying why.
        refused = true;
        return { done: false, value: { errors: [new GraphQLError(error.message, { originalError: error })] } };
      }
      return { done: false, value: await execute({ ...args, rootValue: step.value, contextValue: fresh() }) };
    },
    async return() {
      ended(results);
      await events.return?.();
      return { done: true, value: undefined };
    },
    async throw(error: unknown) {
      ended(results);
      await events.return?.();
      throw error;
    },
    [Symbol.asyncIterator]: () => results,
  };
  return results;
}

function refusal(code: string, message: string): GraphQLError {
  return new GraphQLError(message, { extensions: { code } });
}

function close(socket: WebSocket, code: number, reason: string): void {
  if (socket.readyState === socket.OPEN || socket.readyState === socket.CONNECTING) socket.close(code, reason);
}

export type SubscriptionServer = ReturnType<typeof subscriptionHandler>;
