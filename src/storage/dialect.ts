import { CamelCasePlugin, Kysely, PostgresDialect } from 'kysely';
import fs from 'node:fs';
import path from 'node:path';
import type { Database } from './schema.js';
import { SqliteBooleanPlugin } from './sqlite-boolean-plugin.js';
import type { SqliteHandle } from './sqlite-handle.js';
import { LockingSqliteDialect } from './sqlite-locking-driver.js';
import { statementCache, withStatementCache } from './sqlite-statement-cache.js';
import { BUSY_TIMEOUT_MS, sqliteWriteLock } from './sqlite-write-lock.js';
import { startWalCheckpointer, type WalLockHold } from './wal-checkpointer.js';

export type DialectName = 'sqlite' | 'postgres';

export interface Db {
  readonly kysely: Kysely<Database>;
  readonly dialect: DialectName;
  /** The embedded database's own handle, for the few hot statements that bypass Kysely; null on PostgreSQL. */
  readonly sqlite: SqliteHandle | null;
  /** Cheap round trip for /readyz. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

export interface DbOptions {
  /** postgres:// URL; when null the embedded SQLite file under dataDir is used. */
  databaseUrl: string | null;
  /** PostgreSQL: the most connections this process opens (DATABASE_POOL_SIZE; 10 when not given). */
  poolSize?: number;
  dataDir: string;
  /** ':memory:' or a file path; overrides the file under dataDir (tests). */
  sqliteFile?: string;
  /**
   * Checkpoint the embedded database's WAL from a worker thread instead of inside the commits of the main
   * connection (see wal-checkpointer.ts). For the long-running server; short-lived commands leave it off.
   */
  backgroundCheckpoints?: boolean;
  /** Told when background checkpoints fail (they then fall back to SQLite's own). */
  onCheckpointError?: (message: string) => void;
  /** Told when the checkpoint thread held the write lock for over a second (see wal-checkpointer.ts). */
  onCheckpointSlowHold?: (hold: WalLockHold) => void;
  /** How long a write waits for SQLite's write lock held by another connection (tests; BUSY_TIMEOUT_MS). */
  writeLockTimeoutMs?: number;
}

const CHECKPOINT_INTERVAL_MS = 1000;
/** sqlite3_backup_step's page count meaning "everything left" (better-sqlite3 caps it at 2^31 - 1). */
const ALL_PAGES = 0x7fffffff;
const JOURNAL_SIZE_LIMIT = 64 * 1024 * 1024;

/** The embedded database's file under DATA_DIR. */
export function sqliteFileIn(dataDir: string): string {
  return path.join(dataDir, 'portcullis.db');
}

export async function openDb(options: DbOptions): Promise<Db> {
  if (options.databaseUrl) {
    const pg = await import('pg');
    // Numeric columns (bigserial) come back as strings by default; audit sequence numbers fit in a double.
    pg.default.types.setTypeParser(20, (v: string) => Number(v));
    // Named in pg_stat_activity (an application_name in the URL takes precedence), so that an operator can
    // count each process's connections against max_connections.
    const pool = new pg.default.Pool({
      connectionString: options.databaseUrl,
      max: options.poolSize ?? 10,
      connectionTimeoutMillis: 5000,
      application_name: 'portcullis',
    });
    // A connection the server cuts (an administrator, a failover, a restart) emits `error`, and an `error`
    // event without a listener ends the process. The pool listens on its idle clients only; a client that a
    // transaction holds between two statements needs its own listener, for its whole life. Either way the
    // statement that needed the connection fails (and reports it), and the pool drops the broken client.
    pool.on('error', () => {});
    pool.on('connect', (client) => client.on('error', () => {}));
    const kysely = new Kysely<Database>({
      dialect: new PostgresDialect({ pool }),
      plugins: [new CamelCasePlugin()],
    });
    return {
      kysely,
      dialect: 'postgres',
      sqlite: null,
      ping: async () => {
        await pool.query('select 1');
      },
      close: () => kysely.destroy(),
    };
  }
  const { default: SQLite } = await import('better-sqlite3');
  let file = options.sqliteFile;
  if (!file) {
    fs.mkdirSync(options.dataDir, { recursive: true, mode: 0o700 });
    file = sqliteFileIn(options.dataDir);
    // The database holds token digests and encrypted keys: readable by its owner only. Created here with
    // that mode before SQLite opens it; SQLite gives its -wal and -shm files the database file's mode.
    fs.closeSync(fs.openSync(file, 'a', 0o600));
  }
  const database = new SQLite(file);
  database.pragma('journal_mode = WAL');
  database.pragma('foreign_keys = ON');
  database.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
  database.pragma('synchronous = NORMAL');
  const checkpointer =
    options.backgroundCheckpoints && file !== ':memory:'
      ? startWalCheckpointer(database, file, {
          intervalMs: CHECKPOINT_INTERVAL_MS,
          journalSizeLimit: JOURNAL_SIZE_LIMIT,
          onError: options.onCheckpointError,
          onSlowHold: options.onCheckpointSlowHold,
        })
      : null;
  const prepare = statementCache(database);
  const lock = sqliteWriteLock(database, prepare, options.writeLockTimeoutMs);
  const kysely = new Kysely<Database>({
    dialect: new LockingSqliteDialect({ database: withStatementCache(database, prepare) }, database, prepare, lock),
    plugins: [new CamelCasePlugin(), new SqliteBooleanPlugin()],
  });
  return {
    kysely,
    dialect: 'sqlite',
    sqlite: {
      prepare,
      get inTransaction() {
        return database.inTransaction;
      },
      beginImmediate: () => lock.begin(),
      immediateTransaction: (run) => lock.transaction(run),
      backup: async (destination) => {
        // All remaining pages in one step, so in one read transaction: copied in steps, the backup would
        // start again after every commit another connection made between two steps, and might never end
        // on a busy server. WAL mode lets the writers (and the checkpoints) go on meanwhile.
        const { totalPages } = await database.backup(destination, { progress: () => ALL_PAGES });
        return totalPages;
      },
    },
    ping: async () => {
      database.prepare('select 1').get();
    },
    close: async () => {
      await checkpointer?.stop();
      await kysely.destroy();
    },
  };
}
