import type { Statement } from 'better-sqlite3';
import type { CompiledQuery, Kysely } from 'kysely';
import { camelCaseSelect } from './camel-case-select.js';
import type { Where } from './filter-sql.js';
import { selectPage, type Page, type PageRequest } from './paging.js';
import type { Database } from './schema.js';
import type { SqliteHandle } from './sqlite-handle.js';

/**
 * A resource type's table as storage sees it: its name (as Kysely names it, camelCase) and the columns its
 * representation is read from — never a secret. Declared by the type's resource module (src/resources/).
 */
export interface ResourceTable {
  name: string;
  columns: readonly string[];
}

export type StoredRow = Record<string, unknown>;

/** A query builder on any table: resource tables are named by their modules, not by `Database`. */
function builder(db: Kysely<Database>) {
  return db as unknown as Kysely<Record<string, StoredRow>>;
}

const loadQueries = new WeakMap<Kysely<Database>, WeakMap<ResourceTable, CompiledQuery>>();

/**
 * The load-by-id query of a table, built and compiled once per database: it runs on every request that
 * targets a resource, and building a Kysely query costs more than executing it.
 */
function compiledLoad(db: Kysely<Database>, table: ResourceTable): CompiledQuery {
  let queries = loadQueries.get(db);
  if (!queries) loadQueries.set(db, (queries = new WeakMap()));
  let compiled = queries.get(table);
  if (!compiled) {
    compiled = builder(db).selectFrom(table.name).select(table.columns as never).where('id', '=', '').compile();
    queries.set(table, compiled);
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
 * One row by id, or null. On SQLite, while no transaction holds the connection, the prepared statement runs
 * at once (no promise): every targeted request does this read.
 */
export function loadRow(db: Kysely<Database>, sqlite: SqliteHandle | null, table: ResourceTable, id: string): StoredRow | null | Promise<StoredRow | null> {
  const compiled = compiledLoad(db, table);
  if (sqlite !== null && !sqlite.inTransaction) return (directLoad(sqlite, compiled).get(id) as StoredRow | undefined) ?? null;
  return db.executeQuery<StoredRow>({ ...compiled, parameters: [id] }).then(({ rows }) => rows[0] ?? null);
}

/** The rows with these ids, in one statement (`where id in (...)`); ids that name no row are left out. */
export async function loadRows(db: Kysely<Database>, sqlite: SqliteHandle | null, table: ResourceTable, ids: readonly string[]): Promise<StoredRow[]> {
  if (ids.length === 0) return [];
  // On SQLite, while no transaction holds the connection: one prepared statement per table, whatever the
  // number of ids (they travel as one JSON array), run at once.
  if (sqlite !== null && !sqlite.inTransaction) {
    // One id (a post's author): the point lookup, cheaper than reading a JSON array.
    if (ids.length === 1) {
      const row = directLoad(sqlite, compiledLoad(db, table)).get(ids[0]) as StoredRow | undefined;
      return row === undefined ? [] : [row];
    }
    return directLoadMany(sqlite, db, table).all(JSON.stringify(ids)) as StoredRow[];
  }
  return builder(db).selectFrom(table.name).select(table.columns as never).where('id', 'in', ids).execute() as Promise<StoredRow[]>;
}

const directLoadsMany = new WeakMap<CompiledQuery, Statement>();

/** `select <columns> from <table> where id in (select value from json_each(?))`, prepared once per table. */
function directLoadMany(sqlite: SqliteHandle, db: Kysely<Database>, table: ResourceTable): Statement {
  const compiled = compiledLoad(db, table);
  let statement = directLoadsMany.get(compiled);
  if (!statement) {
    const single = directLoad(sqlite, compiled).source;
    const many = single.replace(/ where "id" = \?\)$/, ' where "id" in (select value from json_each(?)))');
    if (many === single) throw new Error(`unexpected load statement: ${single}`);
    statement = sqlite.prepare(many);
    directLoadsMany.set(compiled, statement);
  }
  return statement;
}

/** One page of a table's rows matching every condition, in id order (see paging.ts). */
export function selectRowPage(db: Kysely<Database>, table: ResourceTable, where: Where[], request: PageRequest): Promise<Page<StoredRow>> {
  return selectPage<StoredRow>(db, table.name as keyof Database, where, request, table.columns);
}

export async function insertRow(db: Kysely<Database>, table: ResourceTable, row: StoredRow): Promise<void> {
  await builder(db).insertInto(table.name).values(row).execute();
}

export async function updateRow(db: Kysely<Database>, table: ResourceTable, id: string, changes: StoredRow): Promise<void> {
  await builder(db).updateTable(table.name).set(changes).where('id', '=', id).execute();
}

/**
 * How many rows matching every condition hold each of `values` in `field` (the children of each parent):
 * one grouped statement; a value with none is absent from the map.
 */
export async function countRowsWhereIn(db: Kysely<Database>, table: ResourceTable, field: string, values: readonly string[], where: Where[]): Promise<Map<string, number>> {
  if (values.length === 0) return new Map();
  const rows = (await builder(db)
    .selectFrom(table.name)
    .select((eb) => [eb.ref(field).as('parent'), eb.fn.countAll().as('count')])
    .where((eb) => eb.and([eb(field, 'in', values), ...where.map((condition) => condition(eb))]))
    .groupBy(field)
    .execute()) as { parent: unknown; count: unknown }[];
  return new Map(rows.map((row) => [String(row.parent), Number(row.count)]));
}

/** Ids of the rows whose `field` holds one of `values` (the children of those parents). */
export async function selectIdsWhereIn(db: Kysely<Database>, table: ResourceTable, field: string, values: readonly string[]): Promise<string[]> {
  if (values.length === 0) return [];
  const rows = await builder(db).selectFrom(table.name).select('id').where(field, 'in', values).execute();
  return rows.map((row) => String(row.id));
}

/** Deletes the rows whose `field` holds one of `values`. */
export async function deleteRowsWhereIn(db: Kysely<Database>, table: ResourceTable, field: string, values: readonly string[]): Promise<void> {
  if (values.length === 0) return;
  await builder(db).deleteFrom(table.name).where(field, 'in', values).execute();
}
