import type { Kysely } from 'kysely';
import type { Database } from './schema.js';

/**
 * Removes sign-in rows that expired before `before`: interactions, sessions, authorization codes, device
 * codes and refresh tokens. Expiry bounds what an anonymous caller can leave behind (an abandoned
 * authorization request, a device code nobody entered). A rotated refresh token stays until its own
 * expiry, so its reuse is detected for as long as it could have been used.
 */
export async function purgeExpiredSignInRows(db: Kysely<Database>, before: string): Promise<void> {
  await db.deleteFrom('interactions').where('expiresAt', '<', before).execute();
  await db.deleteFrom('loginSessions').where('expiresAt', '<', before).execute();
  await db.deleteFrom('authorizationCodes').where('expiresAt', '<', before).execute();
  await db.deleteFrom('deviceCodes').where('expiresAt', '<', before).execute();
  await db.deleteFrom('refreshTokens').where('expiresAt', '<', before).execute();
}
