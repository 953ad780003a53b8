import type { Database as SqliteDatabase, Statement } from 'better-sqlite3';

/**
 * How long a statement waits for a lock another connection holds before it fails with SQLITE_BUSY: SQLite's
 * own `busy_timeout` for the rare waits of a reader, and this module's bound for the write lock.
 */
export const BUSY_TIMEOUT_MS = 5000;

/** The longest pause between two attempts at the write lock. */
const MAX_PAUSE_MS = 4;

/**
 * Takes SQLite's write lock (`BEGIN IMMEDIATE`) without blocking the event loop. SQLite's busy handler waits
 * for a lock by sleeping the thread — 1, 2, 5, 10 … 100 ms at a time, up to `busy_timeout` — and
 * better-sqlite3 runs on the event loop, so with several workers on one file (WORKERS=N) a worker whose
 * write met another's slept with every request it held: measured, 2.4 s of every 5 s under a write load.
 * Here the attempt is made with no busy wait; when another connection holds the lock, the attempt is made
 * again after a pause (1 ms, growing to MAX_PAUSE_MS), the event loop serving other requests meanwhile,
 * until BUSY_TIMEOUT_MS have passed: then the SQLITE_BUSY error is thrown, as SQLite's would have been.
 */
export interface SqliteWriteLock {
  /** `BEGIN IMMEDIATE`: at once (nothing returned) when the lock is free, else a promise. The caller ends it. */
  begin(): void | Promise<void>;
  /**
   * `run` (synchronous) in a transaction begun as `begin` does, in the same turn as the lock is taken:
   * committed once it returns, rolled back if it throws (unless SQLite already rolled back).
   */
  transaction<T>(run: () => T): T | Promise<T>;
}

export function sqliteWriteLock(database: SqliteDatabase, prepare: (sql: string) => Statement, timeoutMs = BUSY_TIMEOUT_MS): SqliteWriteLock {
  const begin = prepare('begin immediate');
  const commit = prepare('commit');
  const rollback = prepare('rollback');
  const restoreWait = () => database.exec(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`);
  /**
   * One attempt: the error when another connection holds the lock, nothing once it is taken. SQLite applies
   * a `busy_timeout` pragma when it compiles the statement, not when it runs it, so each is compiled anew:
   * readers keep their wait, only this BEGIN goes without. `exec` compiles and runs it without a statement
   * object or a result for JavaScript (under 1 µs, against 4–7 µs through `pragma()`).
   */
  const attempt = (): Error | undefined => {
    database.exec('PRAGMA busy_timeout = 0');
    let outcome: Error | undefined;
    try {
      begin.run();
    } catch (error) {
      if (!isBusy(error)) {
        restoreWait();
        throw error;
      }
      outcome = error as Error;
    }
    try {
      restoreWait();
    } catch (error) {
      // The connection would go on without its readers' wait: the transaction is not handed out either.
      if (database.inTransaction) rollback.run();
      throw error;
    }
    return outcome;
  };
  const retry = async (first: Error): Promise<void> => {
    const deadline = Date.now() + timeoutMs;
    let pause = 1;
    let busy: Error | undefined = first;
    while (busy !== undefined) {
      if (Date.now() >= deadline) throw busy;
      await new Promise((resolve) => setTimeout(resolve, pause));
      pause = Math.min(pause * 2, MAX_PAUSE_MS);
      busy = attempt();
    }
  };
  const take = (): void | Promise<void> => {
    const busy = attempt();
    if (busy !== undefined) return retry(busy);
  };
  const inTransaction = <T>(run: () => T): T => {
    try {
      const result = run();
      commit.run();
      return result;
    } catch (error) {
      if (database.inTransaction) rollback.run();
      throw error;
    }
  };
  return {
    begin: take,
    transaction<T>(run: () => T): T | Promise<T> {
      const taken = take();
      return taken === undefined ? inTransaction(run) : taken.then(() => inTransaction(run));
    },
  };
}

/** SQLITE_BUSY and its extended codes (SQLITE_BUSY_SNAPSHOT, …). */
export function isBusy(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && code.startsWith('SQLITE_BUSY');
}
