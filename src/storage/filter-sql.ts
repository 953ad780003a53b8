import type { Expression, ExpressionBuilder, SqlBool } from 'kysely';
import { sql } from 'kysely';
import type { RowFilter } from '../policy/rule-filter.js';
import type { Database } from './schema.js';

type AnyBuilder = ExpressionBuilder<Database, keyof Database>;

/** The table a resource type lives in (its resource module says). */
export type TableOf = (type: string) => string;

/**
 * Turns a compiled policy filter into a SQL condition (see src/policy/rule-filter.ts); a `{ parent, via }`
 * condition becomes a sub-select on the parent type's table.
 */
export function filterToSql(eb: AnyBuilder, filter: RowFilter, tableOf: TableOf, qualifier?: string): Expression<SqlBool> {
  const column = (field: string) => eb.ref((qualifier ? `${qualifier}.${field}` : field) as never);
  switch (filter.kind) {
    case 'all':
      return sql<SqlBool>`1 = 1`;
    case 'none':
      return sql<SqlBool>`1 = 0`;
    case 'equals':
      return eb(column(filter.field), '=', filter.value as never);
    case 'any':
      return eb.or(filter.filters.map((f) => filterToSql(eb, f, tableOf, qualifier)));
    case 'every':
      return eb.and(filter.filters.map((f) => filterToSql(eb, f, tableOf, qualifier)));
    case 'parent': {
      const parentTable = tableOf(filter.parentType);
      const alias = `p_${filter.parentType}`;
      const parentIds = eb
        .selectFrom(`${parentTable} as ${alias}` as never)
        .select(`${alias}.id` as never)
        .where((inner: AnyBuilder) => filterToSql(inner, filter.filter, tableOf, alias));
      return eb(column(filter.via), 'in', parentIds as never);
    }
  }
}

/** A condition on one row of whichever table a query reads. */
export type Where = (eb: AnyBuilder) => Expression<SqlBool>;

type Value = string | number | boolean;

/** `field = value` for each field whose value is given (query filters: absent means "any"). */
export function whereEqual(fields: Record<string, Value | undefined>): Where[] {
  return Object.entries(fields)
    .filter((entry): entry is [string, Value] => entry[1] !== undefined)
    .map(([field, value]) => (eb) => eb(eb.ref(field as never), '=', value as never));
}

/** `field >= value` / `field < value` when the value is given (time ranges). */
export function whereCompare(field: string, operator: '>=' | '<', value: Value | undefined): Where[] {
  return value === undefined ? [] : [(eb) => eb(eb.ref(field as never), operator, value as never)];
}
