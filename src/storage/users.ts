import type { Kysely, Selectable } from 'kysely';
import type { Database, UsersTable } from './schema.js';

export type Role = 'admin' | 'editor' | 'member';

export interface UserRecord {
  id: string;
  email: string;
  name: string;
  role: Role;
  active: boolean;
  createdAt: string;
  updatedAt: string;
}

export function toUserRecord(row: Omit<Selectable<UsersTable>, 'revocations'>): UserRecord {
  return {
    id: row.id,
    email: row.email,
    name: row.name,
    role: row.role as Role,
    active: Boolean(row.active),
    createdAt: row.createdAt,
    updatedAt: row.updatedAt,
  };
}

/** Every column a user resource is served from: never the password hash. */
export const USER_COLUMNS = ['id', 'email', 'name', 'role', 'active', 'createdAt', 'updatedAt'] as const;

export async function findUserById(db: Kysely<Database>, id: string): Promise<UserRecord | null> {
  const row = await db.selectFrom('users').select(USER_COLUMNS).where('id', '=', id).executeTakeFirst();
  return row ? toUserRecord({ ...row, passwordHash: '' }) : null;
}

export async function findUserCredentials(
  db: Kysely<Database>,
  email: string,
): Promise<(UserRecord & { passwordHash: string; revocations: number }) | null> {
  const row = await findUserRowByEmail(db, email);
  return row ? { ...toUserRecord(row), passwordHash: row.passwordHash, revocations: Number(row.revocations) } : null;
}

export async function insertUser(
  db: Kysely<Database>,
  user: Omit<UserRecord, 'createdAt' | 'updatedAt'> & { passwordHash: string },
  now: string,
): Promise<UserRecord> {
  const row = { ...user, createdAt: now, updatedAt: now };
  await db.insertInto('users').values(row).execute();
  return toUserRecord(row);
}

/** Emails are unique regardless of case (migration 004), so a look-up ignores case too. */
export function findUserRowByEmail(db: Kysely<Database>, email: string) {
  return db
    .selectFrom('users')
    .selectAll()
    .where((eb) => eb(eb.fn('lower', ['email']), '=', email.toLowerCase()))
    .executeTakeFirst();
}

export async function updatePasswordHash(db: Kysely<Database>, userId: string, passwordHash: string, updatedAt: string): Promise<void> {
  await db.updateTable('users').set({ passwordHash, updatedAt }).where('id', '=', userId).execute();
}

/** A new sign-in email for the user; a unique violation when another account has it. */
export async function updateUserEmail(db: Kysely<Database>, userId: string, email: string, updatedAt: string): Promise<void> {
  await db.updateTable('users').set({ email, updatedAt }).where('id', '=', userId).execute();
}

/** The profile fields a replacement sets, and a new password's hash when one was given. */
export type UserChanges = Pick<UserRecord, 'email' | 'name' | 'role' | 'active' | 'updatedAt'> & { passwordHash?: string };

/** As resource-rows.ts `updateRow`: only the version read (`readUpdatedAt`); false when it changed meanwhile. */
export async function updateUserRow(db: Kysely<Database>, id: string, readUpdatedAt: string, changes: UserChanges): Promise<boolean> {
  const result = await db.updateTable('users').set(changes).where('id', '=', id).where('updatedAt', '=', readUpdatedAt).executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

export async function deleteUserRow(db: Kysely<Database>, id: string): Promise<void> {
  await db.deleteFrom('users').where('id', '=', id).execute();
}
