import type { Exchange } from '../pipeline/exchange.js';

/**
 * One GraphQL request as the pipeline sees it. The request's own exchange carries authentication and the
 * rate limit; each root field is decided on a copy naming that field (`Query.post`) and its access rule, so
 * the audit log has one decision per root field, as REST has one per operation.
 */
export interface GraphqlExchange extends Exchange {
  interface: 'graphql';
}
