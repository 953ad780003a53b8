import { sql, type Kysely, type Migration } from 'kysely';
import type { DialectName } from '../dialect.js';

/**
 * Two things that make a revocation final everywhere:
 * - `access_tokens.client_registration_id`: the `clients.id` of the registration a token was issued to. A
 *   `client_id` can be registered again after a deletion; a token names the registration, not the string,
 *   so an old token never acts for the new holder. Rows written before this migration are bound to the
 *   registration that holds their `client_id` now (a token whose client is gone stays refused).
 * - `invalidations`: one row per revocation, deactivation, deletion, role or scope change, written in the
 *   transaction that makes the change. Every server follows the sequence and drops what it cached, so a
 *   change made by any process (the CLI, another instance) takes effect everywhere within a second.
 */
export const tokenBindingAndInvalidations = (dialect: DialectName): Migration => ({
  async up(db: Kysely<unknown>) {
    await db.schema.alterTable('access_tokens').addColumn('client_registration_id', 'text').execute();
    await sql`
      update access_tokens set client_registration_id =
        (select clients.id from clients where clients.client_id = access_tokens.client_id)`.execute(db);

    await db.schema
      .createTable('invalidations')
      .addColumn('seq', dialect === 'postgres' ? 'bigserial' : 'integer', (c) =>
        dialect === 'postgres' ? c.primaryKey() : c.primaryKey().autoIncrement(),
      )
      .addColumn('kind', 'text', (c) => c.notNull())
      .addColumn('target', 'text', (c) => c.notNull())
      .addColumn('created_at', 'text', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('invalidations_created_idx').on('invalidations').column('created_at').execute();
  },
});
