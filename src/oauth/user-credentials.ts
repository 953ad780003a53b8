import { createHash } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Database } from '../storage/schema.js';
import { findUserCredentials, type UserRecord } from '../storage/users.js';
import { hashPassword, verifyPassword } from './passwords.js';
import { generateSecret } from './secrets.js';

/** Checked against when the email is unknown, so that case costs one scrypt like a wrong password. */
let decoyHash: Promise<string> | null = null;

function decoy(): Promise<string> {
  // Made once; a decoy refused (too many hashes at once, passwords.ts) is made again next time, not kept
  // as a refusal for good.
  decoyHash ??= hashPassword(generateSecret()).catch((error: unknown) => {
    decoyHash = null;
    throw error;
  });
  return decoyHash;
}

/** The active user with this email and password, or null (unknown email, wrong password, deactivated). */
export async function verifyUserCredentials(db: Kysely<Database>, email: string, password: string): Promise<UserRecord | null> {
  return (await checkUserCredentials(db, email, password))?.user ?? null;
}

/**
 * As verifyUserCredentials, with the stamp of the password that was checked (credentialStamp) and how many
 * times the user's tokens had been revoked then (a grant compares it under the user's lock).
 */
export async function checkUserCredentials(
  db: Kysely<Database>,
  email: string,
  password: string,
): Promise<{ user: UserRecord; credentialStamp: string; revocations: number } | null> {
  const found = await findUserCredentials(db, email);
  const matches = await verifyPassword(password, found?.passwordHash ?? (await decoy()));
  if (!found || !matches || !found.active) return null;
  const { passwordHash, revocations, ...user } = found;
  return { user, credentialStamp: credentialStamp(passwordHash), revocations };
}

/**
 * A value that changes whenever the user's password does (the stored hash has a fresh salt each time), and
 * says nothing about it: what a known-device cookie is bound to, so that a password change ends them all.
 */
export function credentialStamp(passwordHash: string): string {
  return createHash('sha256').update(passwordHash).digest('base64url');
}

/** The current credential stamp of the user with this email, or null when there is none. */
export async function currentCredentialStamp(db: Kysely<Database>, email: string): Promise<string | null> {
  const found = await findUserCredentials(db, email);
  return found ? credentialStamp(found.passwordHash) : null;
}
