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

/**
 * Remembers a consent page's answer: the scope set the user allowed the client (space-separated, sorted),
 * replacing what was remembered before, and as declined what was `requested` now or declined before and is
 * not allowed now — an unticked `offline_access` stays declined until the user ticks it. Answers the scopes
 * remembered as declined.
 */
export async function rememberConsent(db: Kysely<Database>, consent: Omit<ConsentRow, 'declinedScopes'>, requested: readonly string[]): Promise<string[]> {
  const before = (await findConsent(db, consent.userId, consent.clientRegistrationId))?.declinedScopes?.split(' ') ?? [];
  const allowed = new Set(consent.scopes.split(' '));
  const declined = [...new Set([...requested, ...before])].filter((scope) => !allowed.has(scope));
  const row: ConsentRow = { ...consent, declinedScopes: declined.length === 0 ? null : declined.join(' ') };
  await db
    .insertInto('consents')
    .values(row)
    .onConflict((oc) => oc.columns(['userId', 'clientRegistrationId']).doUpdateSet({ scopes: row.scopes, grantedAt: row.grantedAt, clientId: row.clientId, declinedScopes: row.declinedScopes }))
    .execute();
  return declined;
}

export async function deleteConsent(db: Kysely<Database>, userId: string, clientRegistrationId: string): Promise<boolean> {
  const result = await db
    .deleteFrom('consents')
    .where('userId', '=', userId)
    .where('clientRegistrationId', '=', clientRegistrationId)
    .executeTakeFirst();
  return Number(result.numDeletedRows) > 0;
}
