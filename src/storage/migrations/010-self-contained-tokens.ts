import type { Kysely, Migration } from 'kysely';

/**
 * Client-credentials JWTs become self-contained: no row is stored when one is issued. What can end one
 * before it expires is kept elsewhere:
 * - `clients.revocations`: how many times the client's tokens were revoked (a leaked secret, the client's
 *   deletion). A token carries the count it was issued under and stops working once the count moves on.
 * - `revoked_access_tokens`: the jti of each such token revoked by itself (RFC 7009), kept until the token
 *   would have expired anyway.
 */
export const selfContainedTokens: Migration = {
  async up(db: Kysely<unknown>) {
    await db.schema
      .alterTable('clients')
      .addColumn('revocations', 'integer', (column) => column.notNull().defaultTo(0))
      .execute();
    await db.schema
      .createTable('revoked_access_tokens')
      .addColumn('jti', 'text', (column) => column.primaryKey())
      .addColumn('expires_at', 'text', (column) => column.notNull())
      .execute();
    await db.schema.createIndex('revoked_access_tokens_expiry_idx').on('revoked_access_tokens').column('expires_at').execute();
  },
};
