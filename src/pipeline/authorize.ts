import { ApiError } from '../errors/registry.js';
import { decideAccess, type CoarseDecision } from '../policy/decide.js';
import type { Principal } from '../policy/principal.js';
import type { OperationAccess, PolicyTable } from '../policy/table.js';
import { bearerChallenge } from './www-authenticate.js';

/** Stage 3: scope and role, before the request body is even read. Throws the documented error. */
export function authorize(table: PolicyTable, access: OperationAccess, principal: Principal): CoarseDecision {
  const decision = decideAccess(table, access, principal);
  if (decision.allowed) return decision;
  switch (decision.reason) {
    case 'authentication':
      throw new ApiError('UNAUTHENTICATED', undefined, { headers: { 'www-authenticate': bearerChallenge() } });
    case 'scope':
      throw new ApiError('INSUFFICIENT_SCOPE', `The access token needs the scope ${access.scopes.join(' ')}.`, {
        headers: { 'www-authenticate': bearerChallenge('insufficient_scope', { scope: access.scopes.join(' ') }) },
      });
    case 'role':
      throw new ApiError('FORBIDDEN');
  }
}
