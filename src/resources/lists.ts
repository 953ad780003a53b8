import type { Principal } from '../policy/principal.js';
import type { ResourceRow } from '../policy/resource-rule.js';
import { compileRuleFilter } from '../policy/rule-filter.js';
import type { PolicyTable } from '../policy/table.js';
import { filterToSql, whereEqual } from '../storage/filter-sql.js';
import type { Page, PageRequest } from '../storage/paging.js';
import { selectRowPage } from '../storage/resource-rows.js';
import type { ResourceStore } from './load.js';
import type { ResourceModule } from './resource-module.js';

type FilterValue = string | number | boolean | undefined;

/**
 * A page of the resources of a type the principal may read, filtered in the database by the policy's read
 * rule and by the module's list filters whose values are given (`values`: the operation's query and path
 * parameters; absent means any).
 */
export async function listReadable(
  store: ResourceStore & { policy: PolicyTable },
  principal: Principal,
  module: ResourceModule<unknown>,
  values: Readonly<Record<string, unknown>>,
  page: PageRequest,
): Promise<Page<ResourceRow>> {
  const filter = compileRuleFilter(store.policy, module.type, 'read', principal);
  const where = whereEqual(Object.fromEntries(module.filters.map((field) => [field, values[field] as FilterValue])));
  const result = await selectRowPage(store.db, module.table, [...where, (eb) => filterToSql(eb, filter, store.resources.tableOf)], page);
  return { rows: result.rows.map((row) => module.fromRow(row)), next: result.next };
}
