/**
 * The hand-written references' audit append: a batch of events appended to the chain at once when SQLite's
 * write lock is free, as the pipeline's audit log does. The only other writer of a reference's file is its
 * WAL checkpoint thread, which holds the lock for a moment when it starts the WAL over after a checkpoint
 * (most often just after writes pause) and while it copies the end of a WAL that outgrew its limit
 * (src/storage/wal-checkpoint-worker.mjs); a batch that meets it waits for the lock, as the pipeline's would.
 * Each append reads the chain's last hash under the lock, so batches that waited chain in the order they
 * commit. A batch whose wait ran out (SQLITE_BUSY after 5 s) is tried again, up to BUSY_ATTEMPTS times, as
 * the pipeline's audit log tries a failed batch again: the benchmark stops a server (SIGSTOP) while another
 * is measured, and a server stopped while its checkpoint thread held the lock finds, once continued, its
 * waiting batch's deadline passed although the lock is free. Any other failed append ends the server: a
 * reference that lost its audit rows would not be measuring what it says.
 */
import { appendOnSqlite } from '../../src/audit/append-events.js';
import type { AuditEvent } from '../../src/audit/audit-event.js';
import type { SqliteHandle } from '../../src/storage/sqlite-handle.js';

/** Attempts at one batch whose wait for the write lock ran out, before the server gives up. */
const BUSY_ATTEMPTS = 3;

const waiting = new Set<Promise<void>>();

export function appendAudit(sqlite: SqliteHandle, batch: readonly AuditEvent[], attempt = 1): void {
  const appended = appendOnSqlite(sqlite, batch);
  if (appended === undefined) return;
  const settled = appended.then(
    () => void waiting.delete(settled),
    (error: unknown) => {
      waiting.delete(settled);
      if ((error as { code?: unknown }).code === 'SQLITE_BUSY' && attempt < BUSY_ATTEMPTS) {
        appendAudit(sqlite, batch, attempt + 1);
        return;
      }
      console.error(error);
      process.exit(1);
    },
  );
  waiting.add(settled);
}

/** Resolves once every append that had to wait has committed (before the database is closed). */
export async function auditAppended(): Promise<void> {
  while (waiting.size > 0) await Promise.all(waiting);
}
