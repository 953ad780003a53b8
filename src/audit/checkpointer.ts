import type { Kysely } from 'kysely';
import type { Database } from '../storage/schema.js';
import type { AuditLog } from './audit-log.js';
import { writeCheckpoint, type AuditSigningKey } from './checkpoints.js';

export interface CheckpointerLogger {
  error(obj: object, msg: string): void;
}

/**
 * Signs a checkpoint of the audit chain every `intervalMs` when events were added, and a last one on
 * `stop()` (after the audit log's final flush), so at most one interval of events is ever unvouched for.
 * Every instance may run it: checkpoints are numbered in the database, and a writer that loses the race
 * for a number retries.
 */
export function startCheckpointer(db: Kysely<Database>, key: AuditSigningKey, audit: AuditLog, logger: CheckpointerLogger, intervalMs: number) {
  let running: Promise<unknown> = Promise.resolve();
  const checkpoint = () =>
    (running = running
      .then(() => audit.flush())
      .then(() => writeCheckpoint(db, key))
      .catch((error: unknown) => logger.error({ err: error }, 'audit.checkpoint_failed')));
  const timer = setInterval(checkpoint, intervalMs);
  timer.unref();
  return {
    /** Call after the audit log is closed: its last events get a checkpoint too. */
    async stop(): Promise<void> {
      clearInterval(timer);
      await checkpoint();
    },
  };
}
