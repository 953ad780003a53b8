import type { Kysely } from 'kysely';
import type { EventPublisher } from '../events/event-bus.js';
import type { operations } from '../../generated/openapi.js';
import type { OperationId } from '../../generated/routes.js';
import type { MaybePromise } from '../policy/maybe-promise.js';
import type { Principal } from '../policy/principal.js';
import type { ResourceRow } from '../policy/resource-rule.js';
import type { PolicyTable } from '../policy/table.js';
import type { ResourceLoaders } from '../resources/loaders.js';
import type { ResourceRegistry } from '../resources/registry.js';
import type { Database } from '../storage/schema.js';
import type { SqliteHandle } from '../storage/sqlite-handle.js';

/** What handlers may use. No request, no reply: the same handler serves REST and GraphQL. */
export interface OperationDeps {
  db: Kysely<Database>;
  /** The embedded database's direct handle (hot reads), or null on PostgreSQL. */
  sqlite: SqliteHandle | null;
  policy: PolicyTable;
  /** The resource modules of the contract's resource types. */
  resources: ResourceRegistry;
  /** The published OpenAPI document, serialised once. */
  publishedSpec: string;
  graphqlSdl: string;
  /** ACCESS_TOKEN_TTL: the access-token lifetime of a client registered without one. */
  defaultAccessTokenTtl: number;
  /** Where committed changes are announced to GraphQL subscribers (posts published, comments added). */
  events: EventPublisher;
  /** Called after a user or client changes in a way that must end cached sessions at once. */
  invalidateSubject(subject: string): void;
  /**
   * A replacement body's contract (a PUT's), for PATCH: the fields it takes, and its check of a body —
   * VALIDATION_FAILED with `/body/...` details, or the body with the contract's defaults filled in.
   */
  replacement(operationId: string): { fields: readonly string[]; check(body: unknown): unknown };
}

export interface OperationContext {
  principal: Principal;
  /** The resource the pipeline loaded and authorized (x-resource), or null. */
  resource: ResourceRow | null;
  deps: OperationDeps;
  /** This request's batched resource loaders (expansions). */
  loaders: ResourceLoaders;
}

type Op<K extends OperationId> = operations[K];
type Part<T, K extends string> = T extends { [P in K]: infer V } ? (V extends undefined ? Record<string, never> : V) : Record<string, never>;

export type PathParams<K extends OperationId> = Part<Op<K>['parameters'], 'path'>;
export type QueryParams<K extends OperationId> = NonNullable<Part<Op<K>['parameters'], 'query'>>;
export type RequestBody<K extends OperationId> = Op<K> extends { requestBody: { content: { 'application/json': infer B } } }
  ? B
  : Op<K> extends { requestBody?: { content: { 'application/json': infer B } } }
    ? B
    : undefined;

type Responses<K extends OperationId> = Op<K>['responses'];
type SuccessCode<K extends OperationId> = Extract<keyof Responses<K>, 200 | 201 | 204>;
type ContentOf<R> = R extends { content: infer C } ? C[keyof C] : undefined;

export type HandlerResult<K extends OperationId> = {
  [S in SuccessCode<K>]: { status: S; body: ContentOf<Responses<K>[S]>; headers?: Record<string, string>; secrets?: readonly string[] };
}[SuccessCode<K>];

export interface OperationInput<K extends OperationId> {
  params: PathParams<K>;
  query: QueryParams<K>;
  body: RequestBody<K>;
}

/** A handler answers at once when it waits for nothing (a read served by the resource the pipeline loaded). */
export type Handler<K extends OperationId> = (input: OperationInput<K>, ctx: OperationContext) => MaybePromise<HandlerResult<K>>;

/** Every operation in the contract must have a handler: a missing one fails the typecheck. */
export type OperationHandlers = { [K in OperationId]: Handler<K> };

/**
 * The handler table as the REST adapter calls it, by operationId: the contract's, or one that serves a
 * contract with more operations (a resource type added in a test).
 */
export type HandlerTable = Readonly<Record<string, (input: never, ctx: OperationContext) => MaybePromise<unknown>>>;
