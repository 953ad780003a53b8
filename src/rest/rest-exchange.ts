import type { IncomingHttpHeaders } from 'node:http';
import type { Exchange } from '../pipeline/exchange.js';
import type { RouteDefinition } from './route-definition.js';

/** One REST request: the pipeline's exchange and what only HTTP has. Plain data, no framework objects. */
export interface RestExchange extends Exchange {
  interface: 'rest';
  route: RouteDefinition;
  method: string;
  /** Path as requested, without the query string. */
  path: string;
  pathVersioned: boolean;
  headers: IncomingHttpHeaders;
  query: Record<string, unknown>;
  params: Record<string, string>;
  body: unknown;
  /** Vendor media type to answer with when the client asked for one. */
  mediaType: string | null;
  /** Headers every response to this request carries (`Vary`, ...), besides the rate limit's. */
  responseHeaders: Readonly<Record<string, string>>;
}
