import { describe, expect, it } from 'vitest';
import { createTestDatabase, DATABASE_KINDS } from '../helpers/databases.js';
import { insertUser, findUserById } from '../../src/storage/users.js';
import { newId, nowIso } from '../../src/storage/ids.js';

describe.each(DATABASE_KINDS)('storage on %s', (kind) => {
  it('migrates an empty database and round-trips a user with a boolean flag', async () => {
    const t = await createTestDatabase(kind);
    try {
      const id = newId();
      await insertUser(t.db.kysely, { id, email: 'a@example.com', name: 'A', role: 'member', active: false, passwordHash: 'x' }, nowIso());
      const user = await findUserById(t.db.kysely, id);
      expect(user).toMatchObject({ id, email: 'a@example.com', active: false, role: 'member' });
      await expect(t.db.ping()).resolves.toBeUndefined();
    } finally {
      await t.drop();
    }
  });

  it('generates strictly increasing ids', () => {
    const ids = Array.from({ length: 1000 }, () => newId());
    expect([...ids].sort()).toEqual(ids);
    expect(new Set(ids).size).toBe(ids.length);
  });
});
