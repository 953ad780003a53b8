import type { Database as SqliteDatabase, Statement } from 'better-sqlite3';
import { SqliteDialect, type CompiledQuery, type DatabaseConnection, type Driver, type QueryResult, type SqliteDialectConfig } from 'kysely';
import type { SqliteWriteLock } from './sqlite-write-lock.js';

/** Statements that change the database and may run outside a transaction (Kysely's writes, migrations' DDL). */
const WRITE = /^\s*(?:insert|update|delete|replace|with|create|drop|alter)\b/i;

/**
 * Kysely's SQLite dialect, with every write taking the write lock through `SqliteWriteLock` (never SQLite's
 * sleeping busy handler, see sqlite-write-lock.ts): a transaction begins IMMEDIATE — it takes the lock
 * before its first read, so what it reads stays true until it commits, in this process and in any other on
 * the file, where a DEFERRED one that read first would fail with SQLITE_BUSY on its first write once another
 * process had written — and a write outside a transaction runs in one of its own, as SQLite's autocommit
 * would, begun the same way.
 */
export class LockingSqliteDialect extends SqliteDialect {
  readonly #database: SqliteDatabase;
  readonly #prepare: (sql: string) => Statement;
  readonly #lock: SqliteWriteLock;

  constructor(config: SqliteDialectConfig, database: SqliteDatabase, prepare: (sql: string) => Statement, lock: SqliteWriteLock) {
    super(config);
    this.#database = database;
    this.#prepare = prepare;
    this.#lock = lock;
  }

  override createDriver(): Driver {
    return new LockingSqliteDriver(super.createDriver(), this.#database, this.#prepare, this.#lock);
  }
}

class LockingSqliteDriver implements Driver {
  readonly #connections = new WeakMap<DatabaseConnection, DatabaseConnection>();

  constructor(
    private readonly inner: Driver,
    private readonly database: SqliteDatabase,
    private readonly prepare: (sql: string) => Statement,
    private readonly lock: SqliteWriteLock,
  ) {}

  init(): Promise<void> {
    return this.inner.init();
  }

  async acquireConnection(): Promise<DatabaseConnection> {
    const connection = await this.inner.acquireConnection();
    let locking = this.#connections.get(connection);
    if (!locking) this.#connections.set(connection, (locking = this.#locking(connection)));
    return locking;
  }

  async beginTransaction(): Promise<void> {
    await this.lock.begin();
  }

  commitTransaction(connection: DatabaseConnection): Promise<void> {
    return this.inner.commitTransaction(connection);
  }

  /**
   * Nothing to roll back when SQLite already did (a full disk, say) or a failed COMMIT was the end: the error
   * that ended the transaction is the one to report, not "no transaction is active".
   */
  async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    if (this.database.inTransaction) await this.inner.rollbackTransaction(connection);
  }

  savepoint: Driver['savepoint'] = (connection, name, compile) => this.inner.savepoint!(connection, name, compile);
  rollbackToSavepoint: Driver['rollbackToSavepoint'] = (connection, name, compile) => this.inner.rollbackToSavepoint!(connection, name, compile);
  releaseSavepoint: Driver['releaseSavepoint'] = (connection, name, compile) => this.inner.releaseSavepoint!(connection, name, compile);

  releaseConnection(connection: DatabaseConnection): Promise<void> {
    return this.inner.releaseConnection(connection);
  }

  destroy(): Promise<void> {
    return this.inner.destroy();
  }

  /** The single connection, running a write outside a transaction in a transaction of its own. */
  #locking(connection: DatabaseConnection): DatabaseConnection {
    const { database, prepare, lock } = this;
    return {
      executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
        if (database.inTransaction || !WRITE.test(query.sql) || prepare(query.sql).readonly) return connection.executeQuery<R>(query);
        // Kysely's SQLite connection runs the statement synchronously (better-sqlite3) and hands back a
        // settled promise, so the commit follows it at once. Nothing else of this process runs inside the
        // transaction: every other statement waits for Kysely's single connection, which this one holds.
        return lock.transaction(() => connection.executeQuery<R>(query)) as Promise<QueryResult<R>>;
      },
      streamQuery: (query, chunkSize) => connection.streamQuery(query, chunkSize),
    };
  }
}
