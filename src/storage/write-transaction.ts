import { sql, SqliteAdapter, type Kysely } from 'kysely';
import type { Database } from './schema.js';

/** Whether the database is the embedded SQLite one (one writer at a time, no row locks). */
export function isSqlite(db: Kysely<Database>): boolean {
  return db.getExecutor().adapter instanceof SqliteAdapter;
}

/**
 * A transaction that writes. On SQLite it begins IMMEDIATE on the shared connection (as the audit chain's
 * appends do): the write lock is taken before the first read, so what it reads stays true until it
 * commits, in this process (Kysely's single connection waits) and in any other on the same file
 * (busy_timeout waits); a DEFERRED one that read first would fail with SQLITE_BUSY when another process
 * wrote meanwhile. On PostgreSQL it is an ordinary transaction; row-locks.ts takes the locks that order it
 * against others.
 */
export async function writeTransaction<T>(db: Kysely<Database>, work: (trx: Kysely<Database>) => Promise<T>): Promise<T> {
  if (!isSqlite(db)) return db.transaction().execute(work);
  return db.connection().execute(async (connection) => {
    await sql`begin immediate`.execute(connection);
    try {
      const result = await work(connection);
      await sql`commit`.execute(connection);
      return result;
    } catch (error) {
      // SQLite may have rolled back already (a full disk, say); the error that ended the work or the commit
      // is the one to report. A failed COMMIT leaves the transaction open: without this rollback the shared
      // connection would refuse every later BEGIN.
      await sql`rollback`.execute(connection).catch(() => {});
      throw error;
    }
  });
}
