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

  it('removes client secrets that replays kept before they left them out (migration 006)', async () => {
    const t = await createTestDatabase(kind, { migrate: false });
    try {
      await migrateTo(t.db, '005-token-binding-and-invalidations');
      const body = { id: 'c1', clientId: 'svc', clientSecret: 'kept-in-clear-0123456789', name: 'Svc' };
      const row = { scope: 'admin admin', requestHash: 'h', status: 201, location: '/v1/clients/c1', createdAt: nowIso(), expiresAt: nowIso() };
      await t.db.kysely.insertInto('idempotencyKeys').values({ ...row, key: 'client', body: JSON.stringify(body) }).execute();
      await t.db.kysely.insertInto('idempotencyKeys').values({ ...row, key: 'post', body: JSON.stringify({ id: 'p1', title: 'clientSecret in a title' }) }).execute();
      await migrateToLatest(t.db);
      const rows = await t.db.kysely.selectFrom('idempotencyKeys').select(['key', 'body']).orderBy('key').execute();
      expect(rows.map((r) => [r.key, JSON.parse(r.body!)])).toEqual([
        ['client', { id: 'c1', clientId: 'svc', name: 'Svc' }],
        ['post', { id: 'p1', title: 'clientSecret in a title' }],
      ]);
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
