import type { Principal } from '../policy/principal.js';

/** What every GraphQL resolver receives: the request's principal, decided by the same policy layer as REST. */
export interface GraphqlContext {
  principal: Principal;
  requestId: string;
}
