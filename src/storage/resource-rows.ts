import type { CompiledQuery, Kysely } from 'kysely';
import { camelCaseSelect } from './camel-case-select.js';
import type { Where } from './filter-sql.js';
import { pageOf, pageOffset, pageQuery, selectPage, type Page, type PageRequest } from './paging.js';
import { rowReader, type RowReader } from './row-reader.js';
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

const directLoads = new WeakMap<CompiledQuery, RowReader>();

/** The load query's prepared statement, kept with the compiled query (a statement stays valid until close). */
function directLoad(sqlite: SqliteHandle, compiled: CompiledQuery): RowReader {
  let reader = directLoads.get(compiled);
  if (!reader) {
    const columns = sqlite.prepare(compiled.sql).columns().map((column) => column.name);
    reader = rowReader(sqlite, camelCaseSelect(compiled.sql, columns));
    directLoads.set(compiled, reader);
  }
  return reader;
}

/**
 * One row by id, or null. On SQLite, while no transaction holds the connection, the prepared statement runs
 * at once (no promise): every targeted request does this read.
 */
export function loadRow(db: Kysely<Database>, sqlite: SqliteHandle | null, table: ResourceTable, id: string): StoredRow | null | Promise<StoredRow | null> {
  const compiled = compiledLoad(db, table);
  if (sqlite !== null && !sqlite.inTransaction) return directLoad(sqlite, compiled).get(id) ?? null;
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
      const row = directLoad(sqlite, compiledLoad(db, table)).get(ids[0]);
      return row === undefined ? [] : [row];
    }
    return directLoadMany(sqlite, db, table).all(JSON.stringify(ids));
  }
  return builder(db).selectFrom(table.name).select(table.columns as never).where('id', 'in', ids).execute() as Promise<StoredRow[]>;
}

const directLoadsMany = new WeakMap<CompiledQuery, RowReader>();

/** `select <columns> from <table> where id in (select value from json_each(?))`, prepared once per table. */
function directLoadMany(sqlite: SqliteHandle, db: Kysely<Database>, table: ResourceTable): RowReader {
  const compiled = compiledLoad(db, table);
  let reader = directLoadsMany.get(compiled);
  if (!reader) {
    const single = directLoad(sqlite, compiled).source;
    const many = single.replace(/ where "id" = \?\)$/, ' where "id" in (select value from json_each(?)))');
    if (many === single) throw new Error(`unexpected load statement: ${single}`);
    reader = rowReader(sqlite, many);
    directLoadsMany.set(compiled, reader);
  }
  return reader;
}

/**
 * What a page query's conditions are without their values — a key that names the same SQL text whatever
 * the values — and the values in the order that SQL binds them. With it, a page on SQLite runs its
 * prepared statement at once instead of building the Kysely query again (which costs more than running it).
 */
export interface PageShape {
  key: string;
  values: readonly (string | number | boolean)[];
}

/** Prepared page statements by query shape, per database; null for a shape that must go through Kysely. */
const directPages = new WeakMap<Kysely<Database>, Map<string, RowReader | null>>();
const DIRECT_PAGE_SHAPES = 256;

/** One page of a table's rows matching every condition, in id order (see paging.ts). */
export function selectRowPage(
  db: Kysely<Database>,
  sqlite: SqliteHandle | null,
  table: ResourceTable,
  where: Where[],
  request: PageRequest,
  shape?: PageShape,
): Promise<Page<StoredRow>> {
  if (shape && sqlite !== null && !sqlite.inTransaction) {
    const page = directPage(db, sqlite, table, where, request, shape);
    if (page !== null) return Promise.resolve(page);
  }
  return selectPage<StoredRow>(db, table.name as keyof Database, where, request, table.columns);
}

function directPage(db: Kysely<Database>, sqlite: SqliteHandle, table: ResourceTable, where: Where[], request: PageRequest, shape: PageShape): Page<StoredRow> | null {
  const offset = pageOffset(request);
  const parameters = [
    ...shape.values.map((value) => (typeof value === 'boolean' ? Number(value) : value)),
    ...(request.afterId === undefined ? [] : [request.afterId]),
    request.limit + 1,
    ...(offset === null ? [] : [offset]),
  ];
  const key = `${table.name}\n${shape.key}\n${request.afterId !== undefined}\n${offset !== null}`;
  let statements = directPages.get(db);
  if (!statements) directPages.set(db, (statements = new Map()));
  let reader = statements.get(key);
  if (reader === undefined) {
    // Built once per shape, and used only if Kysely binds exactly the values the shape lists, in order.
    const compiled = pageQuery(db, table.name as keyof Database, where, request, table.columns).compile();
    if (bindsExactly(compiled, parameters)) {
      const columns = sqlite.prepare(compiled.sql).columns().map((column) => column.name);
      reader = rowReader(sqlite, `${camelCaseSelect(compiled.sql, columns)} order by "id"`);
    } else {
      reader = null;
    }
    if (statements.size >= DIRECT_PAGE_SHAPES) statements.delete(statements.keys().next().value!);
    statements.set(key, reader);
  }
  if (reader === null) return null;
  return pageOf(reader.all(...parameters) as (StoredRow & { id: string })[], request.limit);
}

/**
 * Inserts a resource's row. On SQLite the SQL Kysely compiles for this table and these columns runs as a
 * prepared statement (see directWrite): building and compiling the Kysely query cost more than running it.
 */
export async function insertRow(db: Kysely<Database>, sqlite: SqliteHandle | null, table: ResourceTable, row: StoredRow): Promise<void> {
  const plain = sqlite === null || db.isTransaction ? null : plainValues(row);
  if (plain !== null) {
    const sql = directWriteSql(db, `insert\n${table.name}\n${plain.columns}`, plain.values, () => builder(db).insertInto(table.name).values(row).compile());
    if (sql !== null) {
      await directWrite(db, sqlite!, sql, plain.values);
      return;
    }
  }
  await builder(db).insertInto(table.name).values(row).execute();
}

/**
 * Writes `changes` to the row, with `readUpdatedAt` only if it is still the version the caller read: false
 * when another write came in between, so that a request never writes back a stale copy of fields it did not
 * mean to change (a lost update). Null: whatever the version (the changes are all the caller means to set).
 * On SQLite, as a prepared statement (see directWrite).
 */
export async function updateRow(
  db: Kysely<Database>,
  sqlite: SqliteHandle | null,
  table: ResourceTable,
  id: string,
  readUpdatedAt: string | null,
  changes: StoredRow,
): Promise<boolean> {
  const update = () => {
    const query = builder(db).updateTable(table.name).set(changes).where('id', '=', id);
    return readUpdatedAt === null ? query : query.where('updatedAt', '=', readUpdatedAt);
  };
  const plain = sqlite === null || db.isTransaction ? null : plainValues(changes);
  if (plain !== null) {
    const parameters = readUpdatedAt === null ? [...plain.values, id] : [...plain.values, id, readUpdatedAt];
    const sql = directWriteSql(db, `update\n${table.name}\n${plain.columns}\n${readUpdatedAt !== null}`, parameters, () => update().compile());
    if (sql !== null) return (await directWrite(db, sqlite!, sql, parameters)) === 1;
  }
  const result = await update().executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/**
 * A write on SQLite without Kysely, when not given a transaction (which writes through Kysely, on the
 * connection it holds): `sql`, compiled by Kysely once for the write's shape, runs as a prepared statement in
 * a transaction of its own, begun as every write's is (`immediateTransaction`, the write lock
 * without SQLite's sleeping busy handler, see sqlite-write-lock.ts). It holds Kysely's connection meanwhile,
 * as the audit append does, so that no Kysely transaction begins on it while the lock is awaited (another
 * process holding it). Returns the rows changed. (An insert of a post: 40–55 µs instead of 55–105.)
 */
async function directWrite(db: Kysely<Database>, sqlite: SqliteHandle, sql: string, parameters: readonly unknown[]): Promise<number> {
  return db.connection().execute(async () => sqlite.immediateTransaction(() => sqlite.prepare(sql).run(parameters).changes));
}

/** Write SQL by shape, per database; null for a shape Kysely must write. */
const directWrites = new WeakMap<Kysely<Database>, Map<string, string | null>>();
const DIRECT_WRITE_SHAPES = 128;

/**
 * The SQL Kysely compiles for a write's shape (`key`: the statement, its table, its columns), kept per
 * database, and used only if Kysely, compiling the shape's first write, bound exactly `parameters` in this
 * order: the direct write then binds what Kysely would have bound.
 */
function directWriteSql(db: Kysely<Database>, key: string, parameters: readonly unknown[], compile: () => CompiledQuery): string | null {
  let statements = directWrites.get(db);
  if (!statements) directWrites.set(db, (statements = new Map()));
  let sql = statements.get(key);
  if (sql === undefined) {
    const compiled = compile();
    sql = bindsExactly(compiled, parameters) ? compiled.sql : null;
    if (statements.size >= DIRECT_WRITE_SHAPES) statements.delete(statements.keys().next().value!);
    statements.set(key, sql);
  }
  return sql;
}

/** Whether Kysely's compiled query binds exactly `parameters`, in this order. */
function bindsExactly(compiled: CompiledQuery, parameters: readonly unknown[]): boolean {
  return compiled.parameters.length === parameters.length && compiled.parameters.every((value, i) => value === parameters[i]);
}

/**
 * A row's values as Kysely binds them — in the row's order, absent (undefined) ones left out, booleans as 1
 * and 0 (sqlite-boolean-plugin.ts) — with the columns they go to (each after its length, so that no two lists
 * of names read alike); null when one is not a plain value (an SQL expression or an expression's factory,
 * say), which Kysely writes.
 */
function plainValues(row: StoredRow): { columns: string; values: unknown[] } | null {
  const values: unknown[] = [];
  let columns = '';
  for (const column in row) {
    const value = row[column];
    if (value === undefined) continue;
    if (typeof value === 'function' || (value !== null && typeof value === 'object' && !Buffer.isBuffer(value))) return null;
    values.push(typeof value === 'boolean' ? Number(value) : value);
    columns += `${column.length}:${column}`;
  }
  return { columns, values };
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
