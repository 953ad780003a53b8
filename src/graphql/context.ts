import type { Principal } from '../policy/principal.js';
import type { ResourceLoaders } from '../resources/loaders.js';

/** What every GraphQL resolver receives: the request's principal, decided by the same policy layer as REST. */
export interface GraphqlContext {
  principal: Principal;
  requestId: string;
  /** The request's batched resource loaders, the ones REST expansions read through (no N+1). */
  loaders: ResourceLoaders;
}
