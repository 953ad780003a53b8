import type { Kysely, Selectable } from 'kysely';
import type { Database, RefreshTokensTable } from './schema.js';

export type RefreshTokenRow = Selectable<RefreshTokensTable>;

export async function insertRefreshToken(db: Kysely<Database>, row: RefreshTokenRow): Promise<void> {
  await db.insertInto('refreshTokens').values(row).execute();
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
