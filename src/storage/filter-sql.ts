import type { Expression, ExpressionBuilder, SqlBool } from 'kysely';
import { sql } from 'kysely';
import type { RowFilter } from '../policy/rule-filter.js';
import { tableFor } from './resource-tables.js';
import type { Database } from './schema.js';

type AnyBuilder = ExpressionBuilder<Database, keyof Database>;

/** Turns a compiled policy filter into a SQL condition (see src/policy/rule-filter.ts). */
export function filterToSql(eb: AnyBuilder, filter: RowFilter, qualifier?: string): Expression<SqlBool> {
  const column = (field: string) => eb.ref((qualifier ? `${qualifier}.${field}` : field) as never);
  switch (filter.kind) {
    case 'all':
      return sql<SqlBool>`1 = 1`;
    case 'none':
      return sql<SqlBool>`1 = 0`;
    case 'equals':
      return eb(column(filter.field), '=', filter.value as never);
    case 'any':
      return eb.or(filter.filters.map((f) => filterToSql(eb, f, qualifier)));
    case 'parent': {
      const parentTable = tableFor(filter.parentType);
      const alias = `p_${filter.parentType}`;
      const parentIds = eb
        .selectFrom(`${parentTable} as ${alias}` as never)
        .select(`${alias}.id` as never)
        .where((inner: AnyBuilder) => filterToSql(inner, filter.filter, alias));
      return eb(column(filter.via), 'in', parentIds as never);
    }
  }
}
