import { whereCompare, whereEqual } from '../storage/filter-sql.js';
import { listDeprecatedUses as listDeprecatedUseRows } from '../storage/deprecated-uses.js';
import { selectPage } from '../storage/paging.js';
import type { components } from '../../generated/openapi.js';
import { pageBody, pageRequest } from './pages.js';
import type { Handler } from './types.js';

type AuditEventView = components['schemas']['AuditEvent'];

const COLUMNS = [
  'id', 'time', 'requestId', 'subject', 'clientId', 'interface', 'operation', 'resourceType', 'resourceId', 'decision', 'reason',
  'count', 'sourceAddress', 'firstSeen', 'lastSeen', 'scopes', 'traceId', 'hash',
] as const;

/** Stored times are ISO-8601 UTC with milliseconds; any RFC 3339 input is brought to that form to compare. */
function normalizeInstant(value: string): string {
  return new Date(value).toISOString();
}

export const listAuditEvents: Handler<'listAuditEvents'> = async ({ query }, { deps }) => {
  const since = query.since === undefined ? undefined : normalizeInstant(query.since);
  const until = query.until === undefined ? undefined : normalizeInstant(query.until);
  const where = [
    ...whereEqual({ subject: query.subject, clientId: query.client, decision: query.decision, operation: query.operation }),
    ...whereCompare('time', '>=', since),
    ...whereCompare('time', '<', until),
  ];
  // The audit writer stores only the contract's values (interface, decision, reason are fixed vocabularies).
  const page = await selectPage<AuditEventView>(deps.db, 'auditEvents', where, pageRequest(query), COLUMNS);
  return { status: 200, body: pageBody(page.rows, page, query.limit ?? 20) };
};

export const listDeprecatedUses: Handler<'listDeprecatedUses'> = async ({ query }, { deps }) => {
  const page = await listDeprecatedUseRows(deps.db, pageRequest(query));
  return { status: 200, body: pageBody(page.rows, page, query.limit ?? 20) };
};
