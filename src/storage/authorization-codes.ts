import type { Kysely, Selectable } from 'kysely';
import type { AuthorizationCodesTable, Database } from './schema.js';

export type AuthorizationCodeRow = Selectable<AuthorizationCodesTable>;

export async function insertAuthorizationCode(db: Kysely<Database>, row: AuthorizationCodeRow): Promise<void> {
  await db.insertInto('authorizationCodes').values(row).execute();
}

export async function findAuthorizationCode(db: Kysely<Database>, codeHash: string): Promise<AuthorizationCodeRow | null> {
  return (await db.selectFrom('authorizationCodes').selectAll().where('codeHash', '=', codeHash).executeTakeFirst()) ?? null;
}

/**
 * Marks the code redeemed if nobody has: one conditional UPDATE, so of two concurrent exchanges (on any
 * instance) exactly one wins. False means the code was already used.
 */
export async function redeemAuthorizationCode(db: Kysely<Database>, codeHash: string, redeemedAt: string): Promise<boolean> {
  const result = await db
    .updateTable('authorizationCodes')
    .set({ redeemedAt })
    .where('codeHash', '=', codeHash)
    .where('redeemedAt', 'is', null)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}
