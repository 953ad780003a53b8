import type { Principal } from '../policy/principal.js';
import type { ResourceRow } from '../policy/resource-rule.js';
import { compileRuleFilter, type RowFilter } from '../policy/rule-filter.js';
import type { PolicyTable } from '../policy/table.js';
import { filterToSql, whereEqual, type Where } from '../storage/filter-sql.js';
import type { Page, PageRequest } from '../storage/paging.js';
import { selectRowPage, type PageShape } from '../storage/resource-rows.js';
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
  const equal = Object.fromEntries(module.filters.map((field) => [field, values[field] as FilterValue]));
  const where = [...whereEqual(equal), (eb: Parameters<Where>[0]) => filterToSql(eb, filter, store.resources.tableOf)];
  const result = await selectRowPage(store.db, store.sqlite, module.table, where, page, shapeOf(equal, filter));
  return { rows: result.rows.map((row) => module.fromRow(row)), next: result.next };
}

/**
 * The list query's shape: which equality filters are given, and the read rule's filter with its values
 * taken out — in the order whereEqual and filterToSql bind them.
 */
function shapeOf(equal: Readonly<Record<string, FilterValue>>, filter: RowFilter): PageShape {
  const given = Object.entries(equal).filter((entry): entry is [string, string | number | boolean] => entry[1] !== undefined);
  const values: (string | number | boolean)[] = given.map(([, value]) => value);
  const skeleton = (node: RowFilter): string => {
    switch (node.kind) {
      case 'all':
      case 'none':
        return node.kind;
      case 'equals':
        values.push(node.value);
        return `${node.field}=?`;
      case 'any':
      case 'every':
        return `${node.kind}(${node.filters.map(skeleton).join(',')})`;
      case 'parent':
        return `parent(${node.parentType}.${node.via}:${skeleton(node.filter)})`;
    }
  };
  const key = `${given.map(([field]) => field).join(',')}|${skeleton(filter)}`;
  return { key, values };
}
