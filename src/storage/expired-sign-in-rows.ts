import type { Kysely } from 'kysely';
import type { Database } from './schema.js';

/**
 * Removes expired sign-in rows: interactions, sessions, device codes and refresh tokens at expiry,
 * authorization codes after a grace period. Expiry bounds what an anonymous caller can leave behind (an abandoned
 * authorization request, a device code nobody entered). A rotated refresh token stays until its own
 * expiry, so its reuse is detected for as long as it could have been used.
 */
export async function purgeExpiredSignInRows(db: Kysely<Database>, now: string, graceBefore: string): Promise<void> {
  // What anyone can create (an authorization request, a device code) goes at expiry.
  await db.deleteFrom('interactions').where('expiresAt', '<', now).execute();
  await db.deleteFrom('deviceCodes').where('expiresAt', '<', now).execute();
  await db.deleteFrom('loginSessions').where('expiresAt', '<', now).execute();
  await db.deleteFrom('refreshTokens').where('expiresAt', '<', now).execute();
  // A code is kept a while after expiry, so that a late replay still revokes what its first use issued.
  await db.deleteFrom('authorizationCodes').where('expiresAt', '<', graceBefore).execute();
}
