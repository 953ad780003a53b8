import type { Principal } from './principal.js';
import type { Action, Condition, PolicyTable, ResourcePolicy } from './table.js';

/**
 * A resource rule compiled for one principal into a database-neutral filter. Role conditions are decided
 * here (they do not depend on the row); the rest become column comparisons and sub-selects, so lists are
 * filtered in the database and pages keep their size.
 */
export type RowFilter =
  | { kind: 'all' }
  | { kind: 'none' }
  | { kind: 'equals'; field: string; value: string | number | boolean }
  | { kind: 'any'; filters: RowFilter[] }
  | { kind: 'every'; filters: RowFilter[] }
  | { kind: 'parent'; via: string; parentType: string; filter: RowFilter };

const ALL: RowFilter = { kind: 'all' };
const NONE: RowFilter = { kind: 'none' };

export function compileRuleFilter(table: PolicyTable, type: string, action: Action, principal: Principal, depth = 0): RowFilter {
  const policy = table.resources[type];
  const conditions = policy?.rules[action];
  if (!policy || !conditions || depth > 5) return NONE;
  return combine('any', conditions.map((condition) => compileCondition(table, policy, condition, action, principal, depth)));
}

function compileCondition(
  table: PolicyTable,
  policy: ResourcePolicy,
  condition: Condition,
  action: Action,
  principal: Principal,
  depth: number,
): RowFilter {
  if (condition === 'owner') {
    return principal.kind === 'anonymous' || policy.owner === null ? NONE : { kind: 'equals', field: policy.owner, value: principal.id };
  }
  if ('role' in condition) return principal.kind !== 'anonymous' && condition.role.includes(principal.role) ? ALL : NONE;
  if ('field' in condition) return { kind: 'equals', field: condition.field, value: condition.equals };
  if ('all' in condition) return combine('every', condition.all.map((part) => compileCondition(table, policy, part, action, principal, depth)));
  const parent = compileRuleFilter(table, condition.parent, condition.action ?? action, principal, depth + 1);
  return parent.kind === 'none' ? NONE : { kind: 'parent', via: condition.via, parentType: condition.parent, filter: parent };
}

/**
 * Any-of or every-of a list of filters: for any-of, ALL decides and NONE drops out; for every-of the other
 * way round. What is left is one filter or a combination.
 */
function combine(kind: 'any' | 'every', filters: RowFilter[]): RowFilter {
  const [decisive, neutral] = kind === 'any' ? [ALL, NONE] : [NONE, ALL];
  if (filters.some((f) => f.kind === decisive.kind)) return decisive;
  const rest = filters.filter((f) => f.kind !== neutral.kind);
  if (rest.length === 0) return neutral;
  return rest.length === 1 ? rest[0]! : { kind, filters: rest };
}
