import type { components } from '../../generated/openapi.js';

/** The contract's vocabularies for these fields: a value outside them does not compile. */
type Contract = components['schemas']['AuditEvent'];

/** One authorization decision, as the audit log records it. */
export interface AuditDecision {
  requestId: string | null;
  subject: string | null;
  clientId: string | null;
  /** Which API the request came through; `oauth` for the authorization server's own endpoints. */
  interface: Contract['interface'];
  operation: string;
  resourceType: string | null;
  resourceId: string | null;
  decision: Contract['decision'];
  /** Which check decided: public, authenticated, granted, resource; authentication, scope, role, grant. */
  reason: Contract['reason'];
  /** The caller's address; kept only on aggregated events (a refused credential is counted per address). */
  sourceAddress?: string | null;
  /** The scopes a consent, authorization code or token decision was about (space-separated). */
  scopes?: string | null;
}

/** How many decisions one aggregated event stands for, from where, and over which time (else all null). */
export interface AuditAggregate {
  count: number | null;
  sourceAddress: string | null;
  firstSeen: string | null;
  lastSeen: string | null;
}

/** A decision with its event id and time, waiting to be appended to the chain. */
export interface AuditEvent extends Omit<AuditDecision, 'sourceAddress' | 'scopes'>, AuditAggregate {
  id: string;
  time: string;
  scopes: string | null;
  /** The W3C trace id of the request, when its caller sent a `traceparent`. */
  traceId: string | null;
}

// A denial can come before validation: only what has the contract's shape of an id goes into a record.
// (Length apart: V8 runs a counted repetition like {1,64} about twice as slowly as +, and this runs per decision.)
const RESOURCE_ID = /^[A-Za-z0-9_-]+$/;
const CLIENT_ID = /^[A-Za-z0-9._-]{1,128}$/;

/** A resource id taken from a request, if it has the shape of one; otherwise the record says null. */
export function auditableResourceId(id: string | undefined): string | null {
  return id !== undefined && id.length <= 64 && RESOURCE_ID.test(id) ? id : null;
}

/** A client_id as a caller presented it, if it has the shape of one; otherwise the record says null. */
export function auditableClientId(id: string | null | undefined): string | null {
  return typeof id === 'string' && CLIENT_ID.test(id) ? id : null;
}
