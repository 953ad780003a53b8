import type { Kysely } from 'kysely';
import type { Database, IdempotencyKeysTable } from './schema.js';
import { isUniqueViolation } from './unique-violation.js';

export type IdempotencyRecord = IdempotencyKeysTable;

/**
 * Claims a key for a first request. Returns null when this caller won the claim, or the existing record
 * (in flight or completed) when the key was already used. Expired records, pending or completed, are replaced.
 */
export async function claimIdempotencyKey(
  db: Kysely<Database>,
  record: Pick<IdempotencyRecord, 'scope' | 'key' | 'requestHash' | 'createdAt' | 'expiresAt'>,
): Promise<IdempotencyRecord | null> {
  for (let attempt = 0; attempt < 2; attempt++) {
    const existing = await db
      .selectFrom('idempotencyKeys')
      .selectAll()
      .where('scope', '=', record.scope)
      .where('key', '=', record.key)
      .executeTakeFirst();
    if (existing && existing.expiresAt > record.createdAt) return existing;
    if (existing) {
      await db.deleteFrom('idempotencyKeys').where('scope', '=', record.scope).where('key', '=', record.key).execute();
    }
    try {
      await db.insertInto('idempotencyKeys').values({ ...record, status: 0, location: null, body: null }).execute();
      return null;
    } catch (error) {
      // Another request with the same key won the race: read what it stored.
      if (!isUniqueViolation(error)) throw error;
    }
  }
  throw new Error('idempotency key claim did not settle');
}

/**
 * Stores the first request's response and how long it is kept. Only the claim made at `claimedAt` and
 * still pending is completed: once a pending claim has expired, a retry may have replaced it with its own.
 */
export async function completeIdempotencyKey(
  db: Kysely<Database>,
  scope: string,
  key: string,
  claimedAt: string,
  response: { status: number; location: string | null; body: string | null; expiresAt: string },
): Promise<void> {
  await db
    .updateTable('idempotencyKeys')
    .set(response)
    .where('scope', '=', scope)
    .where('key', '=', key)
    .where('createdAt', '=', claimedAt)
    .where('status', '=', 0)
    .execute();
}

/** The first request failed: free the key (its own pending claim, made at `claimedAt`) so that a retry runs for real. */
export async function releaseIdempotencyKey(db: Kysely<Database>, scope: string, key: string, claimedAt: string): Promise<void> {
  await db
    .deleteFrom('idempotencyKeys')
    .where('scope', '=', scope)
    .where('key', '=', key)
    .where('createdAt', '=', claimedAt)
    .where('status', '=', 0)
    .execute();
}

export async function purgeExpiredIdempotencyKeys(db: Kysely<Database>, now: string): Promise<void> {
  await db.deleteFrom('idempotencyKeys').where('expiresAt', '<=', now).execute();
}
