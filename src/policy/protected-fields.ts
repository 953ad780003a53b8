import type { Principal } from './principal.js';
import type { PolicyTable } from './table.js';

/** A field left out and one given as null change nothing (a password the view never shows, say). */
function changed(current: unknown, next: unknown): boolean {
  return next !== undefined && next !== null && next !== current;
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
