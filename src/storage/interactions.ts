import type { Kysely, Selectable } from 'kysely';
import type { Database, InteractionsTable } from './schema.js';

export type InteractionRow = Selectable<InteractionsTable>;

export async function insertInteraction(db: Kysely<Database>, row: InteractionRow): Promise<void> {
  await db.insertInto('interactions').values(row).execute();
}

/** The interaction if it is unfinished and unexpired at `now`. */
export async function findOpenInteraction(db: Kysely<Database>, id: string, now: string): Promise<InteractionRow | null> {
  const row = await db
    .selectFrom('interactions')
    .selectAll()
    .where('id', '=', id)
    .where('completedAt', 'is', null)
    .where('expiresAt', '>', now)
    .executeTakeFirst();
  return row ?? null;
}

/** Marks the interaction finished; false when another request finished it first (one outcome per interaction). */
export async function completeInteraction(db: Kysely<Database>, id: string, completedAt: string): Promise<boolean> {
  const result = await db.updateTable('interactions').set({ completedAt }).where('id', '=', id).where('completedAt', 'is', null).executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

export async function updateInteractionParams(db: Kysely<Database>, id: string, params: string): Promise<void> {
  await db.updateTable('interactions').set({ params }).where('id', '=', id).execute();
}
