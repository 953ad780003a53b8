import type { Principal } from './principal.js';
import type { OperationAccess, PolicyTable } from './table.js';

/** The coarse decision: authentication, scope and role. Per-resource checks come after (resource-rule.ts). */
export type CoarseDecision =
  | { allowed: true; reason: 'public' | 'authenticated' | 'granted' }
  | { allowed: false; reason: 'authentication' }
  | { allowed: false; reason: 'scope'; missingScopes: string[] }
  | { allowed: false; reason: 'role'; permission: string };

export function decideAccess(table: PolicyTable, access: OperationAccess, principal: Principal): CoarseDecision {
  if (access.public) return { allowed: true, reason: 'public' };
  if (principal.kind === 'anonymous') return { allowed: false, reason: 'authentication' };
  if (access.authenticated) return { allowed: true, reason: 'authenticated' };
  // Seed, OAuth security rule 5: scopes are checked on every request, reads and writes alike.
  const missingScopes = access.scopes.filter((scope) => !principal.scopes.has(scope));
  if (missingScopes.length > 0) return { allowed: false, reason: 'scope', missingScopes };
  // Default deny: an operation without a permission never reaches here (codegen refuses it), and a role
  // that does not list the permission is refused.
  if (access.permission === null || !roleHasPermission(table, principal.role, access.permission)) {
    return { allowed: false, reason: 'role', permission: access.permission ?? '(none)' };
  }
  return { allowed: true, reason: 'granted' };
}

export function roleHasPermission(table: PolicyTable, role: string, permission: string): boolean {
  return table.roles[role]?.permissions.includes(permission) ?? false;
}

/** The role's permissions that at least one operation lets this token use under its scopes. */
export function effectivePermissions(table: PolicyTable, role: string, scopes: ReadonlySet<string>): string[] {
  const granted = table.roles[role]?.permissions ?? [];
  return granted.filter((permission) =>
    Object.values(table.operations).some(
      (op) => op.permission === permission && op.scopes.every((scope) => scopes.has(scope)),
    ),
  );
}
