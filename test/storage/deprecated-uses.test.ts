import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addDeprecatedUses, listDeprecatedUses } from '../../src/storage/deprecated-uses.js';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../helpers/databases.js';

describe.each(DATABASE_KINDS)('deprecated-use counts on %s', (kind) => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await createTestDatabase(kind);
  });
  afterAll(async () => {
    await database?.drop();
  });

  it('adds up the counts of instances flushing in any order, keeping the earliest first use and the latest last use', async () => {
    const db = database.db.kysely;
    const use = (uses: number, firstUsedAt: string, lastUsedAt: string) => ({ clientId: 'app', interface: 'rest' as const, name: 'getPost', uses, firstUsedAt, lastUsedAt });
    // The instance that counted later flushes first.
    await addDeprecatedUses(db, [use(2, '2026-11-26T10:05:00.000Z', '2026-11-26T10:06:00.000Z')]);
    await addDeprecatedUses(db, [use(3, '2026-11-26T10:00:00.000Z', '2026-11-26T10:01:00.000Z')]);
    await addDeprecatedUses(db, [use(1, '2026-11-26T10:03:00.000Z', '2026-11-26T10:03:00.000Z')]);
    const page = await listDeprecatedUses(db, { limit: 10 });
    expect(page.rows).toEqual([
      { id: expect.any(String), interface: 'rest', name: 'getPost', clientId: 'app', uses: 6, firstUsedAt: '2026-11-26T10:00:00.000Z', lastUsedAt: '2026-11-26T10:06:00.000Z' },
    ]);
  });
});
