import type { IncomingHttpHeaders } from 'node:http';
import type { AuditDecision } from '../audit/audit-event.js';
import type { Principal } from '../policy/principal.js';
import type { ResourceRow } from '../policy/resource-rule.js';
import type { RouteDefinition } from '../rest/route-definition.js';

/** One REST request as the pipeline stages see it: plain data, no framework objects. */
export interface Exchange {
  route: RouteDefinition;
  requestId: string;
  ip: string;
  method: string;
  /** Path as requested, without the query string. */
  path: string;
  pathVersioned: boolean;
  headers: IncomingHttpHeaders;
  query: Record<string, unknown>;
  params: Record<string, string>;
  body: unknown;
  principal: Principal;
  /** The resource the operation targets, loaded and authorized by the resource stage. */
  resource: ResourceRow | null;
  /** Vendor media type to answer with when the client asked for one. */
  mediaType: string | null;
  /** Headers every response to this request carries (rate limit, Vary, ...). */
  responseHeaders: Record<string, string>;
  /** The authorization decision, recorded in the audit log when the response is sent. */
  decision: Pick<AuditDecision, 'decision' | 'reason'> | null;
}
