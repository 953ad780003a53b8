import type { Kysely, Migration } from 'kysely';

/**
 * `users.revocations`: how many times the user's tokens were revoked — every application's (sign-out
 * everywhere, deactivation, a password reset) or one application's (consent withdrawn). A grant that
 * checked the user's password before its transaction (the password grant) compares it under the user's
 * lock, so that such a revocation committed meanwhile refuses it even though the user row's other columns
 * did not change.
 */
export const userRevocations: Migration = {
  async up(db: Kysely<unknown>) {
    await db.schema
      .alterTable('users')
      .addColumn('revocations', 'integer', (column) => column.notNull().defaultTo(0))
      .execute();
  },
};
