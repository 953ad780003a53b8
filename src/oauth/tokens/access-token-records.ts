import type { Kysely, Selectable } from 'kysely';
import type { AccessTokensTable, Database } from '../../storage/schema.js';
import { recordInvalidation } from '../../storage/invalidations.js';
import { kyselyGrantStore } from '../../storage/grant-store.js';
import { countClientRevocation, countUserRevocation, lockUserForRevocation } from '../../storage/row-locks.js';
import { writeTransaction } from '../../storage/write-transaction.js';

/**
 * Rows of `access_tokens`: one per opaque token and per token of a user's grant — what a revocation marks,
 * and what describes an opaque token. A client-credentials JWT has none (token-service.ts): a revocation
 * of it alone lists its jti in `revoked_access_tokens`, a revocation of its client's tokens counts itself
 * in `clients.revocations`.
 */
export type AccessTokenRow = Selectable<AccessTokensTable>;

export async function insertAccessToken(db: Kysely<Database>, row: AccessTokenRow): Promise<void> {
  await db.insertInto('accessTokens').values(row).execute();
}

export async function findAccessTokenByJti(db: Kysely<Database>, jti: string): Promise<AccessTokenRow | null> {
  return (await db.selectFrom('accessTokens').selectAll().where('jti', '=', jti).executeTakeFirst()) ?? null;
}

/** Opaque tokens are found by the SHA-256 digest of the presented value (an indexed, unique column). */
export async function findAccessTokenByHash(db: Kysely<Database>, tokenHash: string): Promise<AccessTokenRow | null> {
  return (await db.selectFrom('accessTokens').selectAll().where('tokenHash', '=', tokenHash).executeTakeFirst()) ?? null;
}

/**
 * The revoking functions below record an invalidation with the change: pass the transaction that makes it
 * (or the database, for a single statement) so that every running server drops its cached copy.
 */
export async function markAccessTokenRevoked(db: Kysely<Database>, jti: string, revokedAt: string): Promise<void> {
  await db.transaction().execute(async (trx) => {
    await trx.updateTable('accessTokens').set({ revokedAt }).where('jti', '=', jti).where('revokedAt', 'is', null).execute();
    await recordInvalidation(trx, 'token', jti);
  });
}

/** Lists a self-contained token as revoked until `expiresAt`, when it would stop working anyway. */
export async function listRevokedAccessToken(db: Kysely<Database>, jti: string, expiresAt: string): Promise<void> {
  await db.transaction().execute(async (trx) => {
    await trx.insertInto('revokedAccessTokens').values({ jti, expiresAt }).onConflict((conflict) => conflict.column('jti').doNothing()).execute();
    await recordInvalidation(trx, 'token', jti);
  });
}

export async function isAccessTokenListedRevoked(db: Kysely<Database>, jti: string): Promise<boolean> {
  return (await db.selectFrom('revokedAccessTokens').select('jti').where('jti', '=', jti).executeTakeFirst()) !== undefined;
}

/** Rows of tokens that expired before `before` (and their revocations): they can no longer authenticate anything. */
export async function purgeExpiredAccessTokens(db: Kysely<Database>, before: string): Promise<void> {
  await db.deleteFrom('accessTokens').where('expiresAt', '<', before).execute();
  await db.deleteFrom('revokedAccessTokens').where('expiresAt', '<', before).execute();
}

/**
 * Ends one user grant: its access tokens and its refresh token family (a replayed authorization code, a
 * reused refresh token, a revocation of the refresh token, the user withdrawing consent).
 */
export async function revokeGrant(db: Kysely<Database>, grantId: string, revokedAt: string): Promise<boolean> {
  return kyselyGrantStore(db).revokeGrant(grantId, revokedAt);
}

/**
 * Ends a grant whose refresh token was found used already, under the user's lock like every revocation by
 * user: a refresh of the same family in progress (its holder's) commits first and its new tokens are
 * revoked here, or runs after and finds its token revoked. The grant that used the token stored its
 * tokens in the same transaction (grants/grant-commit.ts), so they exist by now.
 */
export async function revokeReplayedGrant(db: Kysely<Database>, grantId: string, userId: string, revokedAt: string): Promise<boolean> {
  return writeTransaction(db, async (trx) => {
    await lockUserForRevocation(trx, userId);
    return revokeGrant(trx, grantId, revokedAt);
  });
}

/**
 * Revokes every live token issued on a user's behalf (deactivation, deletion, password reset). Pass the
 * transaction that makes the change: it takes the user's lock first, so a grant in progress either
 * commits before (and its tokens are revoked here) or runs after and finds its code or token ended
 * (grants/grant-commit.ts).
 */
export async function revokeUserTokens(db: Kysely<Database>, userId: string, revokedAt: string): Promise<number> {
  await countUserRevocation(db, userId);
  const result = await db
    .updateTable('accessTokens')
    .set({ revokedAt })
    .where('subject', '=', userId)
    .where('subjectType', '=', 'user')
    .where('revokedAt', 'is', null)
    .executeTakeFirst();
  // Refresh families and sign-in sessions end too: nothing the user signed in with keeps working, and
  // nothing granted but not yet redeemed (a code, an approved device) can start a new family afterwards.
  await db.updateTable('refreshTokens').set({ revokedAt }).where('userId', '=', userId).where('revokedAt', 'is', null).execute();
  await endPendingGrants(db, userId, null, revokedAt);
  await db.updateTable('loginSessions').set({ revokedAt }).where('userId', '=', userId).where('revokedAt', 'is', null).execute();
  await recordInvalidation(db, 'user', userId);
  return Number(result.numUpdatedRows);
}

/**
 * Revokes every live token issued to a client, its own and its users' (deletion, leaked secret): the rows,
 * and by counting itself in `clients.revocations` the self-contained JWTs, which carry the count they were
 * issued under. Pass the transaction that makes the change: the count's UPDATE locks the registration
 * first, so the grants in progress finish before it and later ones find the registration changed
 * (grants/grant-commit.ts).
 */
export async function revokeClientTokens(db: Kysely<Database>, clientId: string, revokedAt: string): Promise<void> {
  await countClientRevocation(db, clientId);
  await db.updateTable('accessTokens').set({ revokedAt }).where('clientId', '=', clientId).where('revokedAt', 'is', null).execute();
  await db.updateTable('refreshTokens').set({ revokedAt }).where('clientId', '=', clientId).where('revokedAt', 'is', null).execute();
  await recordInvalidation(db, 'client', clientId);
}

/**
 * Ends what a user granted one client registration: its access tokens and refresh families (consent
 * withdrawn). Under the user's lock, like revokeUserTokens.
 */
export async function revokeUserClientTokens(db: Kysely<Database>, userId: string, clientRegistrationId: string, revokedAt: string): Promise<void> {
  await countUserRevocation(db, userId);
  await db
    .updateTable('accessTokens')
    .set({ revokedAt })
    .where('subject', '=', userId)
    .where('subjectType', '=', 'user')
    .where('clientRegistrationId', '=', clientRegistrationId)
    .where('revokedAt', 'is', null)
    .execute();
  await db
    .updateTable('refreshTokens')
    .set({ revokedAt })
    .where('userId', '=', userId)
    .where('clientRegistrationId', '=', clientRegistrationId)
    .where('revokedAt', 'is', null)
    .execute();
  await endPendingGrants(db, userId, clientRegistrationId, revokedAt);
  await recordInvalidation(db, 'user', userId);
}

/**
 * Authorization codes not yet redeemed are marked used, approved device codes denied: of the user's grants
 * (to one client registration, or to all), none issued before this moment can be redeemed after it.
 */
async function endPendingGrants(db: Kysely<Database>, userId: string, clientRegistrationId: string | null, at: string): Promise<void> {
  let codes = db.updateTable('authorizationCodes').set({ redeemedAt: at, outcome: 'withdrawn' }).where('userId', '=', userId).where('redeemedAt', 'is', null);
  let devices = db.updateTable('deviceCodes').set({ status: 'denied' }).where('userId', '=', userId).where('status', '=', 'approved');
  if (clientRegistrationId !== null) {
    codes = codes.where('clientRegistrationId', '=', clientRegistrationId);
    devices = devices.where('clientRegistrationId', '=', clientRegistrationId);
  }
  await codes.execute();
  await devices.execute();
}
