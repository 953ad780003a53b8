/**
 * The hand-written references' audit append: a batch of events appended to the chain at once when SQLite's
 * write lock is free, as the pipeline's audit log does. The only other writer of a reference's file is its
 * WAL checkpoint thread, which holds the lock for a moment when it starts the WAL over after a checkpoint
 * (most often just after writes pause) and while it copies the end of a WAL that outgrew its limit
 * (src/storage/wal-checkpoint-worker.mjs); a batch that meets it waits for the lock, as the pipeline's would. Each append reads the chain's last hash under the lock, so batches
 * that waited chain in the order they commit. A failed append ends the server: a reference that lost its
 * audit rows would not be measuring what it says.
 */
import { appendOnSqlite } from '../../src/audit/append-events.js';
import type { AuditEvent } from '../../src/audit/audit-event.js';
import type { SqliteHandle } from '../../src/storage/sqlite-handle.js';

const waiting = new Set<Promise<void>>();

export function appendAudit(sqlite: SqliteHandle, batch: readonly AuditEvent[]): void {
  const appended = appendOnSqlite(sqlite, batch);
  if (appended === undefined) return;
  const settled = appended.then(
    () => void waiting.delete(settled),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
  waiting.add(settled);
}

/** Resolves once every append that had to wait has committed (before the database is closed). */
export async function auditAppended(): Promise<void> {
  await Promise.all(waiting);
}
