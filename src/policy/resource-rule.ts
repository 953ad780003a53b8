import type { Principal } from './principal.js';
import type { Action, Condition, PolicyTable } from './table.js';

export type ResourceRow = Record<string, unknown>;

/** Loads a parent resource for `{ parent, via }` conditions; null when it does not exist. */
export type LoadResource = (type: string, id: string) => Promise<ResourceRow | null>;

/**
 * Evaluates a resource's rule for an action on a loaded resource (any-of; no rule means deny).
 * The same rules compile to SQL in rule-filter.ts; a test keeps the two in agreement.
 */
export async function evaluateRule(
  table: PolicyTable,
  type: string,
  action: Action,
  principal: Principal,
  resource: ResourceRow,
  load: LoadResource,
): Promise<boolean> {
  const policy = table.resources[type];
  const conditions = policy?.rules[action];
  if (!policy || !conditions) return false;
  for (const condition of conditions) {
    if (await evaluateCondition(table, policy.owner, condition, action, principal, resource, load)) return true;
  }
  return false;
}

async function evaluateCondition(
  table: PolicyTable,
  ownerField: string | null,
  condition: Condition,
  action: Action,
  principal: Principal,
  resource: ResourceRow,
  load: LoadResource,
): Promise<boolean> {
  if (condition === 'owner') {
    return principal.kind !== 'anonymous' && ownerField !== null && resource[ownerField] === principal.id;
  }
  if ('role' in condition) return principal.kind !== 'anonymous' && condition.role.includes(principal.role);
  if ('field' in condition) return resource[condition.field] === condition.equals;
  const parentId = resource[condition.via];
  if (typeof parentId !== 'string') return false;
  const parent = await load(condition.parent, parentId);
  return parent !== null && evaluateRule(table, condition.parent, action, principal, parent, load);
}
