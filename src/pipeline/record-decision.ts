import { auditableResourceId } from '../audit/audit-event.js';
import type { AuditLog } from '../audit/audit-log.js';
import type { Exchange } from './exchange.js';

/** The last stage: the request's authorization decision, allow or deny, goes to the audit log. */
export function recordDecision(ex: Exchange, audit: AuditLog): void {
  if (!ex.decision) return;
  const principal = ex.principal;
  const target = ex.access.resource;
  audit.record({
    requestId: ex.requestId,
    subject: principal.kind === 'anonymous' ? null : principal.subject,
    clientId: principal.kind === 'anonymous' ? null : principal.clientId,
    interface: ex.interface,
    operation: ex.operationId,
    resourceType: target?.type ?? null,
    resourceId: auditableResourceId(target ? ex.resourceId : undefined),
    decision: ex.decision.decision,
    reason: ex.decision.reason,
    sourceAddress: ex.sourceAddress,
  });
}
