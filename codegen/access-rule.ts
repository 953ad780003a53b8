import type { Action, OperationAccess } from '../src/policy/table.js';
import type { Problems } from './problems.js';

export interface PolicySource {
  permissions: Record<string, string>;
  roles: Record<string, { description: string; permissions: string[] }>;
  resources: Record<string, { schema: string; owner?: string; rules: Record<string, unknown>; protectedFields?: Record<string, string[]> }>;
}

export interface AccessContext {
  file: string;
  where: string;
  scopes: Record<string, string>;
  policy: PolicySource;
  problems: Problems;
  /** Names that may carry the resource id (path parameters or field arguments). */
  idParams: string[];
}

export const ACTIONS: readonly Action[] = ['read', 'update', 'delete'];

/**
 * Checks one access rule against the catalogues and returns it normalised. Default deny at build time:
 * a rule that is missing, or names a scope, permission or resource that does not exist, is an error.
 */
export function checkAccess(
  ctx: AccessContext,
  id: string,
  raw: { public?: unknown; authenticated?: unknown; scopes?: unknown; permission?: unknown; resource?: unknown; deprecated?: unknown },
): OperationAccess {
  const { problems, file, where } = ctx;
  const isPublic = raw.public === true;
  const authenticated = raw.authenticated === true;
  const scopes = Array.isArray(raw.scopes) ? raw.scopes.map(String) : null;
  const permission = typeof raw.permission === 'string' ? raw.permission : null;

  if (scopes === null) {
    problems.add(file, where, 'has no access rule (scopes are required; use an empty list only with public or authenticated)');
  } else if (scopes.length === 0 && !isPublic && !authenticated) {
    problems.add(file, where, 'has an empty scope list but is neither public nor authenticated-only');
  } else if (scopes.length > 0 && (isPublic || authenticated)) {
    problems.add(file, where, 'is public/authenticated-only but also lists scopes');
  }
  if (isPublic && authenticated) problems.add(file, where, 'cannot be both public and authenticated-only');
  for (const scope of scopes ?? []) {
    if (!(scope in ctx.scopes)) problems.add(file, where, `scope "${scope}" is not in the scope catalogue`);
  }
  if (scopes && scopes.length > 0 && permission === null) problems.add(file, where, 'has scopes but no permission');
  if (permission !== null) {
    if (!(permission in ctx.policy.permissions)) {
      problems.add(file, where, `permission "${permission}" is not declared in policy.yaml`);
    } else if (!Object.values(ctx.policy.roles).some((role) => role.permissions.includes(permission))) {
      problems.add(file, where, `permission "${permission}" is not granted to any role`);
    }
  }

  let resource: OperationAccess['resource'] = null;
  if (raw.resource !== undefined && raw.resource !== null) {
    const r = raw.resource as { type?: unknown; param?: unknown; action?: unknown };
    const type = String(r.type);
    const param = String(r.param);
    const action = (r.action ?? permission?.split('_')[0] ?? 'read') as Action;
    const declared = ctx.policy.resources[type];
    if (!declared) problems.add(file, where, `resource type "${type}" is not declared in policy.yaml`);
    else if (!declared.rules[action]) problems.add(file, where, `resource type "${type}" has no "${action}" rule`);
    if (!ACTIONS.includes(action)) problems.add(file, where, `resource action "${action}" is not one of ${ACTIONS.join(', ')}`);
    if (!ctx.idParams.includes(param)) problems.add(file, where, `resource parameter "${param}" is not a parameter of the operation`);
    resource = { type, param, action };
  }
  return {
    id,
    public: isPublic,
    authenticated,
    scopes: scopes ?? [],
    permission,
    resource,
    deprecated: raw.deprecated === true,
  };
}
