import { sql, type Kysely, type Migration } from 'kysely';

/**
 * Signing keys rotate on a schedule, and a new key is published before it signs (key-store.ts):
 * - `signing_keys.activates_at`: when the key starts signing (existing keys: when they were made);
 * - `signing_keys.generation`: the key's number among the keys of its algorithm, unique per algorithm, so
 *   that two processes rotating at the same moment cannot both add a key: the second insert is refused.
 *   Existing keys are numbered in the order they were made.
 */
export const signingKeySchedule: Migration = {
  async up(db: Kysely<unknown>) {
    await db.schema.alterTable('signing_keys').addColumn('activates_at', 'text', (c) => c.notNull().defaultTo('')).execute();
    await db.schema.alterTable('signing_keys').addColumn('generation', 'integer', (c) => c.notNull().defaultTo(0)).execute();
    await sql`
      update signing_keys set activates_at = created_at, generation = (
        select count(*) from signing_keys earlier
        where earlier.alg = signing_keys.alg
          and (earlier.created_at < signing_keys.created_at or (earlier.created_at = signing_keys.created_at and earlier.kid <= signing_keys.kid))
      )`.execute(db);
    await db.schema.createIndex('signing_keys_alg_generation').unique().on('signing_keys').columns(['alg', 'generation']).execute();
  },
};
