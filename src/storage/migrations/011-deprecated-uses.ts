import type { Kysely, Migration } from 'kysely';

/**
 * `deprecated_uses`: how often each client used each deprecated REST operation or GraphQL field. Every
 * instance adds its counts to the row (one per client, interface and name), so they add up across
 * processes; `GET /v1/deprecations` lists them. `client_id` is '' for requests without a token.
 */
export const deprecatedUses: Migration = {
  async up(db: Kysely<unknown>) {
    await db.schema
      .createTable('deprecated_uses')
      .addColumn('id', 'text', (column) => column.primaryKey())
      .addColumn('client_id', 'text', (column) => column.notNull())
      .addColumn('interface', 'text', (column) => column.notNull())
      .addColumn('name', 'text', (column) => column.notNull())
      .addColumn('uses', 'bigint', (column) => column.notNull())
      .addColumn('first_used_at', 'text', (column) => column.notNull())
      .addColumn('last_used_at', 'text', (column) => column.notNull())
      .execute();
    await db.schema.createIndex('deprecated_uses_key_idx').unique().on('deprecated_uses').columns(['client_id', 'interface', 'name']).execute();
  },
};
