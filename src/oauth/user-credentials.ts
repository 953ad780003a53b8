import type { Kysely } from 'kysely';
import type { Database } from '../storage/schema.js';
import { findUserCredentials, type UserRecord } from '../storage/users.js';
import { hashPassword, verifyPassword } from './passwords.js';
import { generateSecret } from './secrets.js';

/** Checked against when the email is unknown, so that case costs one scrypt like a wrong password. */
let decoyHash: Promise<string> | null = null;

/** The active user with this email and password, or null (unknown email, wrong password, deactivated). */
export async function verifyUserCredentials(db: Kysely<Database>, email: string, password: string): Promise<UserRecord | null> {
  const found = await findUserCredentials(db, email);
  decoyHash ??= hashPassword(generateSecret());
  const matches = await verifyPassword(password, found?.passwordHash ?? (await decoyHash));
  if (!found || !matches || !found.active) return null;
  const { passwordHash: _hash, ...user } = found;
  return user;
}
