import { sql, type Kysely, type Migration } from 'kysely';

/**
 * Two accounts must not differ only in the case of their email (RFC 5321 lets the local part be
 * case-sensitive, but no mail system in use treats it so, and a look-alike account is an impersonation).
 * Emails are stored as given; uniqueness and look-ups use lower(email).
 */
export const emailCaseInsensitive: Migration = {
  async up(db: Kysely<unknown>) {
    await sql`create unique index users_email_lower_idx on users (lower(email))`.execute(db);
  },
};
