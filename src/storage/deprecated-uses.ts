import { sql, type Kysely } from 'kysely';
import { newId } from './ids.js';
import { selectPage, type Page, type PageRequest } from './paging.js';
import type { Database } from './schema.js';

export interface DeprecatedUseCount {
  /** '' without a token. */
  clientId: string;
  interface: 'rest' | 'graphql';
  name: string;
  uses: number;
  firstUsedAt: string;
  lastUsedAt: string;
}

/** Adds counts to their rows (one per client, interface and name), creating the rows that do not exist yet. */
export async function addDeprecatedUses(db: Kysely<Database>, counts: readonly DeprecatedUseCount[]): Promise<void> {
  for (const count of counts) {
    await db
      .insertInto('deprecatedUses')
      .values({ id: newId(), ...count })
      .onConflict((conflict) =>
        conflict.columns(['clientId', 'interface', 'name']).doUpdateSet({
          uses: sql`deprecated_uses.uses + excluded.uses`,
          // Instances flush in any order: the earliest first use and the latest last use win (ISO-8601 UTC
          // text compares in time order).
          firstUsedAt: sql`case when excluded.first_used_at < deprecated_uses.first_used_at then excluded.first_used_at else deprecated_uses.first_used_at end`,
          lastUsedAt: sql`case when excluded.last_used_at > deprecated_uses.last_used_at then excluded.last_used_at else deprecated_uses.last_used_at end`,
        }),
      )
      .execute();
  }
}

export interface DeprecatedUseRow extends Omit<DeprecatedUseCount, 'clientId'> {
  id: string;
  clientId: string | null;
}

const COLUMNS = ['id', 'clientId', 'interface', 'name', 'uses', 'firstUsedAt', 'lastUsedAt'] as const;

/** One page of the counts, oldest first; a use without a token shows `clientId: null`. */
export async function listDeprecatedUses(db: Kysely<Database>, request: PageRequest): Promise<Page<DeprecatedUseRow>> {
  const page = await selectPage<Record<string, unknown>>(db, 'deprecatedUses', [], request, COLUMNS);
  return {
    next: page.next,
    rows: page.rows.map((row) => ({
      id: String(row.id),
      clientId: row.clientId === '' ? null : String(row.clientId),
      interface: row.interface as DeprecatedUseRow['interface'],
      name: String(row.name),
      uses: Number(row.uses),
      firstUsedAt: String(row.firstUsedAt),
      lastUsedAt: String(row.lastUsedAt),
    })),
  };
}
