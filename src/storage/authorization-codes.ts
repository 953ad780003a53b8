import type { Kysely, Selectable } from 'kysely';
import type { AuthorizationCodesTable, Database } from './schema.js';

export type AuthorizationCodeRow = Selectable<AuthorizationCodesTable>;

/** A new code: not redeemed, so no outcome yet. */
export async function insertAuthorizationCode(db: Kysely<Database>, row: Omit<AuthorizationCodeRow, 'outcome'>): Promise<void> {
  await db.insertInto('authorizationCodes').values({ ...row, outcome: null }).execute();
}

export async function findAuthorizationCode(db: Kysely<Database>, codeHash: string): Promise<AuthorizationCodeRow | null> {
  return (await db.selectFrom('authorizationCodes').selectAll().where('codeHash', '=', codeHash).executeTakeFirst()) ?? null;
}

