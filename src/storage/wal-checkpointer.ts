import type { Database as SqliteDatabase } from 'better-sqlite3';
import { Worker } from 'node:worker_threads';

export interface WalCheckpointerOptions {
  intervalMs: number;
  /** Bytes the WAL file is truncated back to once fully checkpointed. */
  journalSizeLimit: number;
  /** The worker's script; tests point it elsewhere to see the fallback. */
  workerUrl?: URL;
  onError?: (message: string) => void;
  /**
   * Told when the worker held SQLite's write lock for longer than `slowHoldMs` (default SLOW_HOLD_MS) while
   * starting the WAL over or copying the end of an overgrown one: the servers' writes waited that long.
   */
  onSlowHold?: (hold: WalLockHold) => void;
  slowHoldMs?: number;
}

/** A hold of SQLite's write lock by the worker: to copy the end of an overgrown WAL, or to start it over. */
export interface WalLockHold {
  kind: 'catch-up' | 'start-over';
  heldMs: number;
}

/** A hold of the write lock by the worker that is worth telling the operator about. */
export const SLOW_HOLD_MS = 1000;

export interface WalCheckpointer {
  /** Stops the worker after one last checkpoint; the main connection goes back to checkpointing itself. */
  stop(): Promise<void>;
}

/** SQLite's default: a checkpoint whenever a commit leaves the WAL over 1000 pages. */
const AUTOCHECKPOINT_PAGES = 1000;

/**
 * By default SQLite checkpoints on the connection whose commit crosses the WAL threshold, inside that
 * commit: copying a few MB and fsyncing the database file then blocks the event loop for 5–15 ms, which is
 * what the slowest requests waited for. Here the main connection never checkpoints; a worker thread with
 * its own connection runs PASSIVE checkpoints on a timer, which neither wait for nor block readers and
 * writers, so the fsync happens off the event loop. After a complete checkpoint the worker also makes the
 * commit that starts the WAL over, whose header SQLite syncs first (wal-checkpoint-worker.mjs), so that this
 * fsync is not made on the event loop either. When writes never pause long enough for that, and the WAL
 * has grown past `journalSizeLimit`, the worker copies the rest with writers held off (a RESTART
 * checkpoint: the servers' writes wait for the lock, their event loops free) and starts the WAL over. The
 * worker runs at a lower priority than the event loop. If the worker cannot run, the main connection
 * checkpoints itself again, as SQLite would by default.
 */
export function startWalCheckpointer(database: SqliteDatabase, file: string, options: WalCheckpointerOptions): WalCheckpointer {
  database.pragma('wal_autocheckpoint = 0');
  // The connection that starts the WAL over after a complete checkpoint truncates it. The worker does, most
  // of the time; this one when its commit comes first.
  database.pragma(`journal_size_limit = ${options.journalSizeLimit}`);
  const worker = new Worker(options.workerUrl ?? new URL('./wal-checkpoint-worker.mjs', import.meta.url), {
    workerData: {
      file,
      intervalMs: options.intervalMs,
      journalSizeLimit: options.journalSizeLimit,
      slowHoldMs: options.slowHoldMs ?? SLOW_HOLD_MS,
    },
  });
  // The checkpoints must not keep a process alive that has nothing else to do.
  worker.unref();
  let stopped = false;
  let lastError: string | undefined;
  worker.on('message', (message: { error?: string; slowHold?: WalLockHold }) => {
    if (message.error) options.onError?.(message.error);
    if (message.slowHold) options.onSlowHold?.(message.slowHold);
  });
  worker.on('error', (error) => {
    lastError = error.message;
  });
  const exited = new Promise<void>((resolve) => {
    worker.once('exit', (code) => {
      if (!stopped) {
        if (database.open) database.pragma(`wal_autocheckpoint = ${AUTOCHECKPOINT_PAGES}`);
        options.onError?.(lastError ?? `the WAL checkpoint worker exited with code ${code}`);
      }
      resolve();
    });
  });
  return {
    async stop() {
      if (stopped) return exited;
      stopped = true;
      if (database.open) database.pragma(`wal_autocheckpoint = ${AUTOCHECKPOINT_PAGES}`);
      // Held by the event loop again until the last checkpoint is done and the worker has closed.
      worker.ref();
      worker.postMessage('stop');
      return exited;
    },
  };
}
