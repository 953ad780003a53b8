import type { AuditDecision } from '../audit/audit-event.js';
import type { RateLimitResult } from '../limits/rate-limit.js';
import type { Principal } from '../policy/principal.js';
import type { ResourceRow } from '../policy/resource-rule.js';
import type { OperationAccess } from '../policy/table.js';
import type { AuthenticationInput } from './authenticate.js';

/** The API a request came through, as the audit log names it. */
export type Transport = Exclude<AuditDecision['interface'], 'oauth'>;

/**
 * One request as the pipeline's stages see it, whichever API it came through: who is calling, which
 * operation with which access rule, which resource. Plain data; each adapter (src/rest/, src/graphql/)
 * fills it from its own request and extends it with what only it needs.
 */
export interface Exchange {
  /** Recorded as the audit event's `interface`. */
  interface: Transport;
  /** The REST operationId or GraphQL field the access rule belongs to, as the audit log names it. */
  operationId: string;
  /** The operation's access rule from the generated policy table: scopes, permission, resource. */
  access: OperationAccess;
  /** The id of the resource `access.resource` names, as the caller sent it (unvalidated). */
  resourceId: string | undefined;
  credentials: AuthenticationInput;
  requestId: string;
  sourceAddress: string;
  principal: Principal;
  /** The resource the operation targets, loaded and authorized by the resource stage. */
  resource: ResourceRow | null;
  /** The budget the caller is told about (the adapter renders it: RateLimit headers in REST). */
  rateLimit: RateLimitResult | null;
  /** The authorization decision, recorded in the audit log once the request has been answered. */
  decision: Pick<AuditDecision, 'decision' | 'reason'> | null;
}
