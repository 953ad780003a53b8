import { hash } from 'node:crypto';
import type { AuditEventsTable } from '../storage/schema.js';

/** The fields of an audit event that its hash covers: all but its position and the chain itself. */
export type ChainedFields = Omit<AuditEventsTable, 'seq' | 'prevHash' | 'hash'>;

/** The hash before the first event. */
export const GENESIS_HASH = '0'.repeat(64);

/**
 * Each event's hash covers its own fields and the previous event's hash, so changing, removing or
 * reordering any stored event breaks every link after it (`npm run cli -- audit verify` finds the first).
 */
export function chainHash(prevHash: string, event: ChainedFields): string {
  const fields: unknown[] = [
    prevHash,
    event.id,
    event.time,
    event.requestId,
    event.subject,
    event.clientId,
    event.interface,
    event.operation,
    event.resourceType,
    event.resourceId,
    event.decision,
    event.reason,
  ];
  // Aggregated events cover their count, address and times too; a single decision hashes as it always has,
  // so events written before aggregation existed still verify. The count as a number: on SQLite a text
  // written into the column would otherwise hash as the tag of a group below ('scopes', 'traceId').
  if (event.count !== null) fields.push(Number(event.count), event.sourceAddress, event.firstSeen, event.lastSeen);
  // A single decision is written without them; any put there later changes its hash, behind a tag no
  // other group starts with.
  else if (event.sourceAddress != null || event.firstSeen != null || event.lastSeen != null) fields.push('aggregate', event.sourceAddress, event.firstSeen, event.lastSeen);
  // Likewise the scopes of a sign-in decision (consent, code, token), present only on those.
  if (event.scopes != null) fields.push('scopes', event.scopes);
  // And the trace id of a request whose caller sent one.
  if (event.traceId != null) fields.push('traceId', event.traceId);
  return hash('sha256', JSON.stringify(fields), 'hex');
}
