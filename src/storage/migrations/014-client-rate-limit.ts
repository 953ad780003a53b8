import type { Kysely, Migration } from 'kysely';

/** `clients.rate_limit`: the client's own request budget per window; null keeps the server's RATE_LIMIT_MAX. */
export const clientRateLimit: Migration = {
  async up(db: Kysely<unknown>) {
    await db.schema.alterTable('clients').addColumn('rate_limit', 'integer').execute();
  },
};
