import type { Statement } from 'better-sqlite3';

/**
 * Direct access to the embedded database for the statements on every request's path (a resource by id,
 * audit rows): better-sqlite3 runs them synchronously in a few microseconds, where a Kysely round costs
 * several times the statement. Kysely runs everything else, and owns the single connection: a direct
 * statement runs only while no Kysely transaction is open on it (`inTransaction`), or inside
 * `kysely.connection()`, so it never reads another request's uncommitted rows.
 */
export interface SqliteHandle {
  /** A prepared statement, cached by SQL text (shared with Kysely). */
  prepare(sql: string): Statement;
  readonly inTransaction: boolean;
  /**
   * BEGIN IMMEDIATE: takes the write lock before the first read, so another process cannot interleave. At
   * once when no other connection holds it; else a promise, the event loop free while it waits
   * (sqlite-write-lock.ts). The caller commits or rolls back.
   */
  beginImmediate(): void | Promise<void>;
  /** `run` (synchronous) in a transaction begun as `beginImmediate` does, committed once it returns. */
  immediateTransaction<T>(run: () => T): T | Promise<T>;
  /**
   * SQLite's online backup (sqlite3_backup) of the whole database into `file`, an existing empty file or
   * none: the pages as of one read transaction, whatever other connections write meanwhile. Returns the
   * number of pages copied.
   */
  backup(file: string): Promise<number>;
}
