import type { Statement } from 'better-sqlite3';
import type { CompiledQuery, ExpressionBuilder, Kysely } from 'kysely';
import { ApiError } from '../errors/registry.js';
import type { Principal } from '../policy/principal.js';
import type { MaybePromise } from '../policy/maybe-promise.js';
import { evaluateRule, type LoadResource, type ResourceRow } from '../policy/resource-rule.js';
import { compileRuleFilter } from '../policy/rule-filter.js';
import type { Action } from '../policy/table.js';
import { camelCaseSelect } from '../storage/camel-case-select.js';
import { toClientRecord } from '../storage/clients.js';
import { filterToSql, type Where } from '../storage/filter-sql.js';
import { decodeCursor, selectPage, type Page, type PageRequest } from '../storage/paging.js';
import { tableFor } from '../storage/resource-tables.js';
import type { SqliteHandle } from '../storage/sqlite-handle.js';
import type { Database } from '../storage/schema.js';
import { toUserRecord, USER_COLUMNS } from '../storage/users.js';
import type { OperationDeps } from './types.js';


/** Domain shape of a stored row: booleans restored, JSON columns decoded, secrets removed. */
export function toResource(type: string, row: Record<string, unknown>): ResourceRow {
  switch (type) {
    case 'user':
      return { ...toUserRecord({ ...(row as object), passwordHash: '' } as never) };
    case 'client': {
      const { secretHash: _secret, revocations: _revocations, ...client } = toClientRecord(row as never);
      return client;
    }
    default:
      return row;
  }
}


function columnsFor(type: string): readonly string[] | undefined {
  return type === 'user' ? USER_COLUMNS : undefined;
}

const loadQueries = new WeakMap<Kysely<Database>, Map<string, CompiledQuery>>();

/**
 * The load-by-id query of a type, built and compiled once per database: it runs on every request that
 * targets a resource, and building a Kysely query costs more than executing it.
 */
function compiledLoad(db: Kysely<Database>, type: string): CompiledQuery {
  let queries = loadQueries.get(db);
  if (!queries) loadQueries.set(db, (queries = new Map()));
  let compiled = queries.get(type);
  if (!compiled) {
    let query = db.selectFrom(tableFor(type) as 'posts') as any;
    const columns = columnsFor(type);
    query = columns ? query.select(columns) : query.selectAll();
    compiled = query.where('id', '=', '').compile() as CompiledQuery;
    queries.set(type, compiled);
  }
  return compiled;
}

const directLoads = new WeakMap<CompiledQuery, Statement>();

/** The load query's prepared statement, kept with the compiled query (a statement stays valid until close). */
function directLoad(sqlite: SqliteHandle, compiled: CompiledQuery): Statement {
  let statement = directLoads.get(compiled);
  if (!statement) {
    const columns = sqlite.prepare(compiled.sql).columns().map((column) => column.name);
    statement = sqlite.prepare(camelCaseSelect(compiled.sql, columns));
    directLoads.set(compiled, statement);
  }
  return statement;
}

/**
 * Loads one resource by id, or null when it does not exist. On SQLite, while no transaction holds the
 * connection, the prepared statement runs at once: every targeted request does this read.
 */
export function loadResource(deps: OperationDeps, type: string, id: string): MaybePromise<ResourceRow | null> {
  const compiled = compiledLoad(deps.db, type);
  const sqlite = deps.sqlite;
  if (sqlite !== null && !sqlite.inTransaction) {
    const row = directLoad(sqlite, compiled).get(id) as Record<string, unknown> | undefined;
    return row ? toResource(type, row) : null;
  }
  return deps.db
    .executeQuery<Record<string, unknown>>({ ...compiled, parameters: [id] })
    .then(({ rows }) => (rows[0] ? toResource(type, rows[0]) : null));
}

export function resourceLoader(deps: OperationDeps): LoadResource {
  return (type, id) => loadResource(deps, type, id);
}

export async function canAccess(deps: OperationDeps, principal: Principal, type: string, action: Action, resource: ResourceRow): Promise<boolean> {
  return evaluateRule(deps.policy, type, action, principal, resource, resourceLoader(deps));
}

/** A page of the resources the principal may read, filtered in the database by the policy's rule. */
export async function listReadable(
  deps: OperationDeps,
  principal: Principal,
  type: string,
  where: Where[],
  page: PageRequest,
): Promise<Page<ResourceRow>> {
  const filter = compileRuleFilter(deps.policy, type, 'read', principal);
  const result = await selectPage<Record<string, unknown>>(
    deps.db,
    tableFor(type),
    [...where, (eb) => filterToSql(eb, filter)],
    page,
    columnsFor(type),
  );
  return { rows: result.rows.map((row) => toResource(type, row)), next: result.next };
}

/**
 * Loads the related resources named by `field` of each item in one query and keeps only those the
 * principal may read: an expansion never shows what a direct read would hide.
 */
export async function loadReadableByIds(
  deps: OperationDeps,
  principal: Principal,
  type: string,
  ids: string[],
): Promise<Map<string, ResourceRow>> {
  const unique = [...new Set(ids)];
  const readable = new Map<string, ResourceRow>();
  if (unique.length === 0) return readable;
  const filter = compileRuleFilter(deps.policy, type, 'read', principal);
  let query = deps.db.selectFrom(tableFor(type) as 'posts') as any;
  const columns = columnsFor(type);
  query = columns ? query.select(columns) : query.selectAll();
  const rows = (await query
    .where('id', 'in', unique)
    .where((eb: ExpressionBuilder<Database, keyof Database>) => filterToSql(eb, filter))
    .execute()) as Record<string, unknown>[];
  for (const row of rows) readable.set(String(row.id), toResource(type, row));
  return readable;
}

/** The page a list request asks for; a cursor this API did not issue is a validation failure. */
export function pageRequest(query: { limit?: number; page?: number; after?: string }): PageRequest {
  let afterId: string | undefined;
  if (query.after !== undefined) {
    afterId = decodeCursor(query.after) ?? undefined;
    if (afterId === undefined) {
      throw new ApiError('VALIDATION_FAILED', 'The cursor is not valid.', { details: [{ path: '/query/after', message: 'is not a cursor from this API' }] });
    }
  }
  return { limit: query.limit ?? 20, page: query.page, afterId };
}

export function pageBody<T>(data: T[], page: Page<unknown>, limit: number): { data: T[]; page: { limit: number; next: string | null } } {
  return { data, page: { limit, next: page.next } };
}
