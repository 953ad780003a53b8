import type { Principal } from './principal.js';
import type { PolicyTable } from './table.js';

/**
 * A field left out changes nothing; null changes a field that has a value (it clears it), not one the view
 * never shows or holds empty (a password, say).
 */
function changed(current: unknown, next: unknown): boolean {
  if (next === undefined) return false;
  if (next === null) return current !== undefined && current !== null;
  return next !== current;
}

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
    .filter(([field, roles]) => changed(current[field], next[field]) && (role === null || !roles.includes(role)))
    .map(([field]) => field);
}
