import type { Kysely } from 'kysely';
import { kyselyGrantStore } from './grant-store.js';
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
  return kyselyGrantStore(db).lockUser(userId);
}

/** A revocation by user takes the grant's lock first: grants in progress finish before it, later ones wait for it. */
export async function lockUserForRevocation(db: Kysely<Database>, userId: string): Promise<void> {
  if (!isSqlite(db)) await db.selectFrom('users').select('id').where('id', '=', userId).forNoKeyUpdate().execute();
}

/**
 * A revocation of the user's tokens takes the same lock by counting itself in `users.revocations` (the
 * UPDATE is the lock), so that a grant that checked the user before it and commits after it is refused.
 */
export async function countUserRevocation(db: Kysely<Database>, userId: string): Promise<void> {
  await db.updateTable('users').set((eb) => ({ revocations: eb('revocations', '+', 1) })).where('id', '=', userId).execute();
}

/**
 * A revocation by client counts itself in `clients.revocations`, which ends the client's self-contained
 * tokens (they carry the count they were issued under); the UPDATE locks the registration exclusively, so
 * it waits for the grants in progress and later ones wait for it.
 */
export async function countClientRevocation(db: Kysely<Database>, clientId: string): Promise<void> {
  await db.updateTable('clients').set((eb) => ({ revocations: eb('revocations', '+', 1) })).where('clientId', '=', clientId).execute();
}

/**
 * A client registration's version (`updatedAt`), read under a lock that a change made outside the API (a
 * new secret) holds until it commits: on PostgreSQL it waits for the row's other writers, and theirs wait
 * for it. SQLite's write transaction already excludes them. Null: no such registration.
 */
export async function lockClientVersion(db: Kysely<Database>, clientRegistrationId: string): Promise<string | null> {
  const query = db.selectFrom('clients').select('updatedAt').where('id', '=', clientRegistrationId);
  const row = await (isSqlite(db) ? query : query.forUpdate()).executeTakeFirst();
  return row?.updatedAt ?? null;
}
