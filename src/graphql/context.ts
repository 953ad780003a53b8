import type { Principal } from '../policy/principal.js';
import type { ReadableCounts } from '../resources/counts.js';
import type { ResourceLoaders } from '../resources/loaders.js';
import type { GraphqlExchange } from './graphql-exchange.js';
import type { GraphqlDeps } from './graphql-deps.js';

/** What every GraphQL resolver receives: the request's principal, decided by the same policy layer as REST. */
export interface GraphqlContext {
  principal: Principal;
  requestId: string;
  /** The request's batched resource loaders, the ones REST expansions read through (no N+1). */
  loaders: ResourceLoaders;
  /** The request's batched counts of readable children (a post's comments). */
  counts: ReadableCounts;
  /** The request as the pipeline saw it (authentication, rate limit); each root field decides from a copy. */
  exchange: GraphqlExchange;
  deps: GraphqlDeps;
}
