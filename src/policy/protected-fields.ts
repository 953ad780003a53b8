import type { Principal } from './principal.js';
import type { PolicyTable } from './table.js';

/**
 * Fields of a resource that the principal tries to change but may not (policy.yaml `protectedFields`):
 * updating a resource you may update still does not let you change, say, your own role.
 */
export function forbiddenFieldChanges(
  table: PolicyTable,
  type: string,
  principal: Principal,
  current: Record<string, unknown>,
  next: Record<string, unknown>,
): string[] {
  const protectedFields = table.resources[type]?.protectedFields ?? {};
  const role = principal.kind === 'anonymous' ? null : principal.role;
  return Object.entries(protectedFields)
    .filter(([field, roles]) => field in next && next[field] !== current[field] && (role === null || !roles.includes(role)))
    .map(([field]) => field);
}
