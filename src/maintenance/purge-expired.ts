import type { Db } from '../storage/dialect.js';
import { purgeExpiredIdempotencyKeys } from '../storage/idempotency-keys.js';
import { purgeExpiredAccessTokens } from '../oauth/tokens/access-token-records.js';
import { INVALIDATION_RETENTION_MS } from '../oauth/tokens/invalidation-feed.js';
import { purgeOldInvalidations } from '../storage/invalidations.js';
import { purgeExpiredSignInRows } from '../storage/expired-sign-in-rows.js';

export interface MaintenanceLogger {
  error(obj: object, msg: string): void;
}

/** Expired access-token rows are kept a day after expiry (to explain a late 401), then removed. */
const ACCESS_TOKEN_GRACE_MS = 24 * 3600 * 1000;

/**
 * Removes rows that can no longer matter: expired idempotency keys, long-expired access tokens and
 * sign-in records, and invalidations every running server has read long ago.
 */
export async function purgeExpired(db: Db, now: number = Date.now()): Promise<void> {
  await purgeExpiredIdempotencyKeys(db.kysely, new Date(now).toISOString());
  await purgeExpiredAccessTokens(db.kysely, new Date(now - ACCESS_TOKEN_GRACE_MS).toISOString());
  await purgeOldInvalidations(db.kysely, new Date(now - INVALIDATION_RETENTION_MS).toISOString());
  await purgeExpiredSignInRows(db.kysely, new Date(now).toISOString(), new Date(now - ACCESS_TOKEN_GRACE_MS).toISOString());
}

/**
 * Runs `purgeExpired` every `intervalMs` in the background. Every instance may run it: the deletes are
 * idempotent. The timer does not keep the process alive; `stop()` waits for a run in progress.
 */
export function startMaintenance(db: Db, logger: MaintenanceLogger, intervalMs = 10 * 60 * 1000): { stop(): Promise<void> } {
  let running: Promise<void> = Promise.resolve();
  const timer = setInterval(() => {
    running = purgeExpired(db).catch((error: unknown) => logger.error({ err: error }, 'maintenance.purge_failed'));
  }, intervalMs);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
