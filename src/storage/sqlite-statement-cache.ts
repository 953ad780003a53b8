import type { Database as SqliteDatabase, Statement } from 'better-sqlite3';
import type { SqliteDatabase as KyselySqliteDatabase } from 'kysely';

/**
 * better-sqlite3 compiles SQL on every `prepare`; Kysely prepares every query it runs. The same SQL text
 * recurs on every request (one shape per query), so prepared statements are kept, least recently used out.
 * Kysely runs SQLite queries one at a time on its single connection, so a statement is never used twice
 * at once.
 */
export function statementCache(database: SqliteDatabase, maxStatements = 500): (sql: string) => Statement {
  const statements = new Map<string, Statement>();
  return (sql) => {
    let statement = statements.get(sql);
    if (statement) {
      statements.delete(sql);
    } else {
      statement = database.prepare(sql);
      if (statements.size >= maxStatements) statements.delete(statements.keys().next().value!);
    }
    statements.set(sql, statement);
    return statement;
  };
}

/** The database as Kysely's SQLite dialect sees it, preparing through the cache. */
export function withStatementCache(database: SqliteDatabase, prepare: (sql: string) => Statement): KyselySqliteDatabase {
  return { close: () => database.close(), prepare: (sql: string) => prepare(sql) as never };
}
