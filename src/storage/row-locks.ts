import type { Kysely } from 'kysely';
import type { Database } from './schema.js';
import { isSqlite } from './write-transaction.js';

/**
 * Row locks that order a user grant against the revocations that should end it (oauth/grants/grant-commit.ts).
 * On PostgreSQL they are row locks held to the end of the transaction, and every later statement of the
 * transaction sees what the previous holder committed. SQLite has none: a write transaction already
 * excludes every other writer (write-transaction.ts), so there the grant's functions only read and the
 * revocation's do nothing (a read first would only let another process's commit fail the transaction).
 * Locks are taken user first, then client registration, so two transactions never wait on each other in
 * a cycle.
 */

/**
 * The user as the grant's transaction sees it once locked; `updatedAt` moves with every change (a new
 * password), `revocations` with every revocation of the user's tokens (revokeUserTokens, revokeUserClientTokens).
 */
export interface LockedUser {
  active: boolean;
  updatedAt: string;
  revocations: number;
}

/** The grant's lock on its user: against every other grant and every revocation of the user. Null: no such user. */
export async function lockUser(db: Kysely<Database>, userId: string): Promise<LockedUser | null> {
  let query = db.selectFrom('users').select(['active', 'updatedAt', 'revocations']).where('id', '=', userId);
  // NO KEY UPDATE conflicts with an UPDATE of the row (a password or status change) and with itself.
  if (!isSqlite(db)) query = query.forNoKeyUpdate();
  const row = await query.executeTakeFirst();
  return row ? { active: Boolean(row.active), updatedAt: row.updatedAt, revocations: Number(row.revocations) } : null;
}

/**
 * A revocation by user takes the grant's lock first: grants in progress finish before it, later ones wait
 * for it. With `counted`, it is a revocation of the user's tokens and counts itself in `users.revocations`
 * (the UPDATE is the lock), so that a grant that checked the user before it and commits after it is refused.
 */
export async function lockUserForRevocation(db: Kysely<Database>, userId: string, counted = false): Promise<void> {
  if (counted) await db.updateTable('users').set((eb) => ({ revocations: eb('revocations', '+', 1) })).where('id', '=', userId).execute();
  else if (!isSqlite(db)) await db.selectFrom('users').select('id').where('id', '=', userId).forNoKeyUpdate().execute();
}

/**
 * The grant's lock on its client registration, shared: grants of many users to one client go on side by
 * side. Returns when the registration last changed, or undefined when it is gone.
 */
export async function lockClientRegistration(db: Kysely<Database>, clientRegistrationId: string): Promise<{ updatedAt: string } | undefined> {
  let query = db.selectFrom('clients').select('updatedAt').where('id', '=', clientRegistrationId);
  if (!isSqlite(db)) query = query.forShare();
  return query.executeTakeFirst();
}

/** A revocation by client locks its registration exclusively: it waits for the grants in progress, later ones wait for it. */
export async function lockClientForRevocation(db: Kysely<Database>, clientId: string): Promise<void> {
  if (!isSqlite(db)) await db.selectFrom('clients').select('id').where('clientId', '=', clientId).forNoKeyUpdate().execute();
}
