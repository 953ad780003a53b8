import type { Kysely, Selectable } from 'kysely';
import type { AuthorizationCodeOutcome, AuthorizationCodesTable, Database } from './schema.js';

export type AuthorizationCodeRow = Selectable<AuthorizationCodesTable>;

/** A new code: not redeemed, so no outcome yet. */
export async function insertAuthorizationCode(db: Kysely<Database>, row: Omit<AuthorizationCodeRow, 'outcome'>): Promise<void> {
  await db.insertInto('authorizationCodes').values({ ...row, outcome: null }).execute();
}

export async function findAuthorizationCode(db: Kysely<Database>, codeHash: string): Promise<AuthorizationCodeRow | null> {
  return (await db.selectFrom('authorizationCodes').selectAll().where('codeHash', '=', codeHash).executeTakeFirst()) ?? null;
}

/**
 * Marks the code redeemed if nobody has, with what its exchange came to: one conditional UPDATE, so of two
 * concurrent exchanges (on any instance) exactly one wins, and a later presentation learns whether tokens
 * were issued for it. False means the code was already used.
 */
export async function redeemAuthorizationCode(
  db: Kysely<Database>,
  codeHash: string,
  redeemedAt: string,
  outcome: Exclude<AuthorizationCodeOutcome, 'withdrawn'>,
): Promise<boolean> {
  const result = await db
    .updateTable('authorizationCodes')
    .set({ redeemedAt, outcome })
    .where('codeHash', '=', codeHash)
    .where('redeemedAt', 'is', null)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}
