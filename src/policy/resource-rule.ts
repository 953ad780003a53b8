import type { MaybePromise } from './maybe-promise.js';
import type { Principal } from './principal.js';
import type { Action, Condition, PolicyTable } from './table.js';

export type ResourceRow = Record<string, unknown>;

/** Loads a parent resource for `{ parent, via }` conditions; null when it does not exist. */
export type LoadResource = (type: string, id: string) => MaybePromise<ResourceRow | null>;

/**
 * Evaluates a resource's rule for an action on a loaded resource (any-of; no rule means deny).
 * The same rules compile to SQL in rule-filter.ts; a test keeps the two in agreement. Synchronous unless
 * a `{ parent, via }` condition has to wait for its parent to be read.
 */
export function evaluateRule(
  table: PolicyTable,
  type: string,
  action: Action,
  principal: Principal,
  resource: ResourceRow,
  load: LoadResource,
): MaybePromise<boolean> {
  const policy = table.resources[type];
  const conditions = policy?.rules[action];
  if (!policy || !conditions) return false;
  return combine(true, table, policy.owner, conditions, 0, action, principal, resource, load);
}

/**
 * Any-of (`decisive` true) or all-of (`decisive` false): conditions are evaluated in order until one gives
 * the decisive answer, synchronously until one has to wait.
 */
function combine(
  decisive: boolean,
  table: PolicyTable,
  ownerField: string | null,
  conditions: readonly Condition[],
  first: number,
  action: Action,
  principal: Principal,
  resource: ResourceRow,
  load: LoadResource,
): MaybePromise<boolean> {
  for (let i = first; i < conditions.length; i++) {
    const result = evaluateCondition(table, ownerField, conditions[i]!, action, principal, resource, load);
    if (result === decisive) return decisive;
    if (result instanceof Promise) {
      return result.then((answer) =>
        answer === decisive ? decisive : combine(decisive, table, ownerField, conditions, i + 1, action, principal, resource, load),
      );
    }
  }
  return !decisive;
}

function evaluateCondition(
  table: PolicyTable,
  ownerField: string | null,
  condition: Condition,
  action: Action,
  principal: Principal,
  resource: ResourceRow,
  load: LoadResource,
): MaybePromise<boolean> {
  if (condition === 'owner') {
    return principal.kind !== 'anonymous' && ownerField !== null && resource[ownerField] === principal.id;
  }
  if ('role' in condition) return principal.kind !== 'anonymous' && condition.role.includes(principal.role);
  if ('field' in condition) return resource[condition.field] === condition.equals;
  if ('all' in condition) return combine(false, table, ownerField, condition.all, 0, action, principal, resource, load);
  const parentId = resource[condition.via];
  if (typeof parentId !== 'string') return false;
  const parentAction = condition.action ?? action;
  const parent = load(condition.parent, parentId);
  const check = (row: ResourceRow | null) => row !== null && evaluateRule(table, condition.parent, parentAction, principal, row, load);
  return parent instanceof Promise ? parent.then(check) : check(parent);
}
