import type { Kysely, Selectable } from 'kysely';
import type { Database, RefreshTokensTable } from './schema.js';

export type RefreshTokenRow = Selectable<RefreshTokensTable>;

export async function findRefreshToken(db: Kysely<Database>, tokenHash: string): Promise<RefreshTokenRow | null> {
  return (await db.selectFrom('refreshTokens').selectAll().where('tokenHash', '=', tokenHash).executeTakeFirst()) ?? null;
}

/**
 * Marks the token used if it is still current: one conditional UPDATE, so of two concurrent refreshes (on
 * any instance) exactly one wins; false means it was rotated or revoked already.
 */
export async function rotateRefreshToken(db: Kysely<Database>, tokenHash: string, rotatedAt: string): Promise<boolean> {
  const result = await db
    .updateTable('refreshTokens')
    .set({ rotatedAt })
    .where('tokenHash', '=', tokenHash)
    .where('rotatedAt', 'is', null)
    .where('revokedAt', 'is', null)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/** The grant ids (refresh families) a user holds with one client registration. */
export async function userFamilies(db: Kysely<Database>, userId: string, clientRegistrationId: string): Promise<string[]> {
  const rows = await db
    .selectFrom('refreshTokens')
    .select('familyId')
    .distinct()
    .where('userId', '=', userId)
    .where('clientRegistrationId', '=', clientRegistrationId)
    .where('revokedAt', 'is', null)
    .execute();
  return rows.map((row) => row.familyId);
}
