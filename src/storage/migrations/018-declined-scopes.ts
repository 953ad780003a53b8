import type { Kysely, Migration } from 'kysely';

/**
 * `authorization_codes.declined_scopes`, `device_codes.declined_scopes` and `consents.declined_scopes`: the
 * scopes the client asked for that the user left unticked on the consent page (space-separated; null when
 * none were). A refresh token is not issued when the user declined `offline_access`, with or without OpenID
 * Connect (user-tokens.ts): the page describes it as keeping access while the user is away. The consent
 * remembers the decline, so that a later request its scopes cover, answered without the page, does not
 * bring the refresh token back. Rows stored before this version keep null: nothing declined.
 */
export const declinedScopes: Migration = {
  async up(db: Kysely<unknown>) {
    await db.schema.alterTable('authorization_codes').addColumn('declined_scopes', 'text').execute();
    await db.schema.alterTable('device_codes').addColumn('declined_scopes', 'text').execute();
    await db.schema.alterTable('consents').addColumn('declined_scopes', 'text').execute();
  },
};
