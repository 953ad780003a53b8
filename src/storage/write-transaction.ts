import { SqliteAdapter, type Kysely } from 'kysely';
import type { Database } from './schema.js';

/** Whether the database is the embedded SQLite one (one writer at a time, no row locks). */
export function isSqlite(db: Kysely<Database>): boolean {
  return db.getExecutor().adapter instanceof SqliteAdapter;
}

/**
 * A transaction that writes. On SQLite it begins IMMEDIATE on the shared connection (as every Kysely
 * transaction there does, sqlite-locking-driver.ts): the write lock is taken before the first read, so what
 * it reads stays true until it commits, in this process (Kysely's single connection waits) and in any other
 * on the same file. On PostgreSQL it is an ordinary transaction; row-locks.ts takes the locks that order it
 * against others.
 */
export function writeTransaction<T>(db: Kysely<Database>, work: (trx: Kysely<Database>) => Promise<T>): Promise<T> {
  return db.transaction().execute(work);
}
