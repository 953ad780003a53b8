import type { Principal } from './principal.js';
import type { Action, PolicyTable } from './table.js';

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
  | { kind: 'parent'; via: string; parentType: string; filter: RowFilter };

const ALL: RowFilter = { kind: 'all' };
const NONE: RowFilter = { kind: 'none' };

export function compileRuleFilter(table: PolicyTable, type: string, action: Action, principal: Principal, depth = 0): RowFilter {
  const policy = table.resources[type];
  const conditions = policy?.rules[action];
  if (!policy || !conditions || depth > 5) return NONE;
  const filters: RowFilter[] = [];
  for (const condition of conditions) {
    let filter: RowFilter;
    if (condition === 'owner') {
      filter =
        principal.kind === 'anonymous' || policy.owner === null ? NONE : { kind: 'equals', field: policy.owner, value: principal.id };
    } else if ('role' in condition) {
      filter = principal.kind !== 'anonymous' && condition.role.includes(principal.role) ? ALL : NONE;
    } else if ('field' in condition) {
      filter = { kind: 'equals', field: condition.field, value: condition.equals };
    } else {
      const parent = compileRuleFilter(table, condition.parent, action, principal, depth + 1);
      filter = parent.kind === 'none' ? NONE : { kind: 'parent', via: condition.via, parentType: condition.parent, filter: parent };
    }
    if (filter.kind === 'all') return ALL;
    if (filter.kind !== 'none') filters.push(filter);
  }
  if (filters.length === 0) return NONE;
  return filters.length === 1 ? filters[0]! : { kind: 'any', filters };
}
