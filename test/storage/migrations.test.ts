import { describe, expect, it } from 'vitest';
import { createTestDatabase, DATABASE_KINDS } from '../helpers/databases.js';
import { insertUser, findUserById } from '../../src/storage/users.js';
import { newId, nowIso } from '../../src/storage/ids.js';
import { migrateTo, migrateToLatest } from '../../src/storage/migrate.js';

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

  it('drops idempotency records written before their fingerprints were keyed and their secrets left out (migration 006)', async () => {
    const t = await createTestDatabase(kind, { migrate: false });
    try {
      await migrateTo(t.db, '005-token-binding-and-invalidations');
      const body = { id: 'c1', clientId: 'svc', clientSecret: 'kept-in-clear-0123456789', name: 'Svc' };
      const row = { scope: 'admin admin', requestHash: 'h', status: 201, location: '/v1/clients/c1', createdAt: nowIso(), expiresAt: nowIso() };
      await t.db.kysely.insertInto('idempotencyKeys').values({ ...row, key: 'client', body: JSON.stringify(body) }).execute();
      await migrateToLatest(t.db);
      expect(await t.db.kysely.selectFrom('idempotencyKeys').selectAll().execute()).toEqual([]);
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
