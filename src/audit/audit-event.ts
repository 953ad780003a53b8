/** One authorization decision, as the audit log records it. */
export interface AuditDecision {
  requestId: string | null;
  subject: string | null;
  clientId: string | null;
  interface: 'rest' | 'graphql';
  operation: string;
  resourceType: string | null;
  resourceId: string | null;
  decision: 'allow' | 'deny';
  /** Which check decided: public, granted, authentication, scope, role, resource, ... */
  reason: string;
}

/** A decision with its event id and time, waiting to be appended to the chain. */
export interface AuditEvent extends AuditDecision {
  id: string;
  time: string;
}
