import type { Database as SqliteDatabase, Statement } from 'better-sqlite3';
import type { SqliteDatabase as KyselySqliteDatabase } from 'kysely';

/**
 * better-sqlite3 compiles SQL on every `prepare`; Kysely prepares every query it runs. The same SQL text
 * recurs on every request (one shape per query), so prepared statements are kept, least recently used out.
 * Kysely runs SQLite queries one at a time on its single connection, so a statement is never used twice
 * at once.
 */
export function withStatementCache(database: SqliteDatabase, maxStatements = 500): KyselySqliteDatabase {
  const statements = new Map<string, Statement>();
  return {
    close: () => database.close(),
    prepare(sql: string) {
      let statement = statements.get(sql);
      if (statement) {
        statements.delete(sql);
      } else {
        statement = database.prepare(sql);
        if (statements.size >= maxStatements) statements.delete(statements.keys().next().value!);
      }
      statements.set(sql, statement);
      return statement as never;
    },
  };
}
