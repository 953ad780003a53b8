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

const typeRules = new WeakMap<PolicyTable, Map<string, OperationAccess | null>>();

/** A cache per policy table, filled on first use (the table never changes while a process runs). */
function cached(table: PolicyTable, key: string, compute: () => OperationAccess | null): OperationAccess | null {
  let rules = typeRules.get(table);
  if (!rules) typeRules.set(table, (rules = new Map()));
  if (!rules.has(key)) rules.set(key, compute());
  return rules.get(key)!;
}

/**
 * The access rule a GraphQL object type carries (`@auth` on the type) as the evaluator reads one: its scope
 * and permission, which every object of the type returned needs. Null for a type without a rule.
 */
export function objectTypeAccess(table: PolicyTable, typeName: string): OperationAccess | null {
  return cached(table, `type:${typeName}`, () => {
    const rule = table.graphqlTypes[typeName];
    return rule ? { id: `graphql:${typeName}`, public: false, authenticated: false, scopes: rule.scopes, permission: rule.permission, resource: null, deprecated: false } : null;
  });
}

/**
 * What reading one resource of the type needs besides its read rule: the scope and permission of its type
 * (`@auth` on the GraphQL object type that serves it, the same as its REST `get` operation's; a test
 * keeps them equal). An embedded or nested resource needs it as a direct read would. Null when no type
 * serves the resource: nothing allows embedding it (default deny).
 */
export function resourceTypeAccess(table: PolicyTable, resourceType: string): OperationAccess | null {
  return cached(table, `resource:${resourceType}`, () => {
    const typeName = Object.keys(table.graphqlTypes).find((name) => table.graphqlTypes[name]!.resource === resourceType);
    return typeName === undefined ? null : objectTypeAccess(table, typeName);
  });
}
