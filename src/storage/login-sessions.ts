import type { Kysely, Selectable } from 'kysely';
import type { Database, LoginSessionsTable } from './schema.js';

export type LoginSessionRow = Selectable<LoginSessionsTable>;

export async function insertLoginSession(db: Kysely<Database>, row: LoginSessionRow): Promise<void> {
  await db.insertInto('loginSessions').values(row).execute();
}

/** The session with this id if it is neither revoked nor expired at `now`. */
export async function findLiveLoginSession(db: Kysely<Database>, id: string, now: string): Promise<LoginSessionRow | null> {
  const row = await db
    .selectFrom('loginSessions')
    .selectAll()
    .where('id', '=', id)
    .where('revokedAt', 'is', null)
    .where('expiresAt', '>', now)
    .executeTakeFirst();
  return row ?? null;
}

export async function revokeLoginSession(db: Kysely<Database>, id: string, revokedAt: string): Promise<void> {
  await db.updateTable('loginSessions').set({ revokedAt }).where('id', '=', id).where('revokedAt', 'is', null).execute();
}

/** Every session of the user except `keep` (a password change keeps the browser that made it signed in). */
export async function revokeUserLoginSessions(db: Kysely<Database>, userId: string, revokedAt: string, keep: string | null = null): Promise<void> {
  let update = db.updateTable('loginSessions').set({ revokedAt }).where('userId', '=', userId).where('revokedAt', 'is', null);
  if (keep !== null) update = update.where('id', '<>', keep);
  await update.execute();
}
