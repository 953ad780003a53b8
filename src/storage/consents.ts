import type { Kysely, Selectable } from 'kysely';
import type { ConsentsTable, Database } from './schema.js';

export type ConsentRow = Selectable<ConsentsTable>;

export async function findConsent(db: Kysely<Database>, userId: string, clientRegistrationId: string): Promise<ConsentRow | null> {
  const row = await db
    .selectFrom('consents')
    .selectAll()
    .where('userId', '=', userId)
    .where('clientRegistrationId', '=', clientRegistrationId)
    .executeTakeFirst();
  return row ?? null;
}

/** Remembers the scope set the user allowed the client, and what they declined, replacing what was remembered before. */
export async function saveConsent(db: Kysely<Database>, row: ConsentRow): Promise<void> {
  await db
    .insertInto('consents')
    .values(row)
    .onConflict((oc) => oc.columns(['userId', 'clientRegistrationId']).doUpdateSet({ scopes: row.scopes, grantedAt: row.grantedAt, clientId: row.clientId, declinedScopes: row.declinedScopes }))
    .execute();
}

export async function deleteConsent(db: Kysely<Database>, userId: string, clientRegistrationId: string): Promise<boolean> {
  const result = await db
    .deleteFrom('consents')
    .where('userId', '=', userId)
    .where('clientRegistrationId', '=', clientRegistrationId)
    .executeTakeFirst();
  return Number(result.numDeletedRows) > 0;
}
