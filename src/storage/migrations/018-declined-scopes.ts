import type { Kysely, Migration } from 'kysely';

/**
 * `authorization_codes.declined_scopes` and `device_codes.declined_scopes`: the scopes the client asked for
 * that the user left unticked on the consent page (space-separated; null when none were). A refresh token
 * is not issued when the user declined `offline_access`, with or without OpenID Connect (user-tokens.ts):
 * the page describes it as keeping access while the user is away. Codes stored before this version keep
 * null, and are gone within the minutes a code lives.
 */
export const declinedScopes: Migration = {
  async up(db: Kysely<unknown>) {
    await db.schema.alterTable('authorization_codes').addColumn('declined_scopes', 'text').execute();
    await db.schema.alterTable('device_codes').addColumn('declined_scopes', 'text').execute();
  },
};
