import { describe, expect, it } from 'vitest';
import { createTestDatabase, DATABASE_KINDS } from '../helpers/databases.js';
import { insertUser, findUserById } from '../../src/storage/users.js';
import { newId, nowIso } from '../../src/storage/ids.js';
import { migrateTo, migrateToLatest, UnknownMigrationsError } from '../../src/storage/migrate.js';
import { findClientByClientId } from '../../src/storage/clients.js';
import { insertDeviceCode, pendingDeviceCodes } from '../../src/storage/device-codes.js';
import { sql, type Kysely } from 'kysely';

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

  it('refuses a database migrated by a newer version (a rollback), naming the migrations it does not know, and changes nothing', async () => {
    const t = await createTestDatabase(kind);
    try {
      // A newer version's migration: applied once, then the code that had it is gone.
      const table = (name: string) => ({ up: async (db: Kysely<any>) => void (await db.schema.createTable(name).addColumn('id', 'text', (c) => c.primaryKey()).execute()) });
      const newer = { '900-newer-things': table('newer_things'), '901-more': table('more_things') };
      expect(await migrateToLatest(t.db, newer)).toEqual(['900-newer-things', '901-more']);
      const error = await migrateToLatest(t.db).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(UnknownMigrationsError);
      expect((error as UnknownMigrationsError).names).toEqual(['900-newer-things', '901-more']);
      expect((error as Error).message).toBe(
        'The database has applied migrations this version does not know (900-newer-things, 901-more): a newer version of the server, ' +
          'or a contract with more resource types, migrated it. Run that version, or restore a backup taken before it migrated.',
      );
      // With the migrations it knows, the same database migrates (there is nothing left to apply).
      expect(await migrateToLatest(t.db, newer)).toEqual([]);
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

  it('keeps every client through migration 007 and makes its role optional, with the new registration fields defaulted', async () => {
    const t = await createTestDatabase(kind, { migrate: false });
    try {
      await migrateTo(t.db, '006-audit-aggregates-checkpoints');
      const row = {
        id: 'r1', clientId: 'svc', name: 'Svc', type: 'confidential', secretHash: 'h', redirectUris: '[]', grantTypes: '["client_credentials"]',
        scopes: '["read:posts"]', role: 'member', accessTokenFormat: 'jwt', accessTokenTtl: 600, firstParty: false, legacy: false, createdAt: nowIso(), updatedAt: nowIso(),
      };
      await (t.db.kysely as unknown as Kysely<Record<string, Record<string, unknown>>>).insertInto('clients').values(row).execute();
      await migrateToLatest(t.db);
      const client = await findClientByClientId(t.db.kysely, 'svc');
      expect(client).toEqual({
        ...row, firstParty: false, legacy: false, redirectUris: [], grantTypes: ['client_credentials'], scopes: ['read:posts'],
        postLogoutRedirectUris: [], idTokenSignedResponseAlg: 'RS256', revocations: 0, rateLimit: null,
      });
      await t.db.kysely.updateTable('clients').set({ role: null }).where('id', '=', 'r1').execute();
      expect((await findClientByClientId(t.db.kysely, 'svc'))?.role).toBeNull();
      // The client_id stays unique after the SQLite rebuild.
      await expect(t.db.kysely.insertInto('clients').values({ ...row, id: 'r2', postLogoutRedirectUris: '[]', idTokenSignedResponseAlg: 'RS256' }).execute()).rejects.toThrow();
    } finally {
      await t.drop();
    }
  });

  it('numbers the signing keys per algorithm in the order they were made and lets them sign from then (migration 014)', async () => {
    const t = await createTestDatabase(kind, { migrate: false });
    try {
      await migrateTo(t.db, '013-audit-trace-id');
      const legacy = t.db.kysely as unknown as Kysely<Record<string, Record<string, unknown>>>;
      const key = (kid: string, alg: string, createdAt: string, retiredAt: string | null) => ({ kid, alg, publicJwk: '{}', privateJwkEncrypted: 'x', createdAt, retiredAt });
      await legacy
        .insertInto('signingKeys')
        .values([
          key('es-b', 'ES256', '2024-03-01T00:00:00.000Z', null),
          key('es-a', 'ES256', '2024-01-01T00:00:00.000Z', '2024-02-01T00:00:00.000Z'),
          key('es-c', 'ES256', '2024-02-01T00:00:00.000Z', '2024-03-01T00:00:00.000Z'),
          // Two processes' first keys, made in the same millisecond: the kid orders them.
          key('rs-y', 'RS256', '2024-03-01T00:00:00.000Z', null),
          key('rs-x', 'RS256', '2024-03-01T00:00:00.000Z', null),
        ])
        .execute();
      await migrateToLatest(t.db);
      const rows = await t.db.kysely.selectFrom('signingKeys').select(['kid', 'generation', 'createdAt', 'activatesAt', 'retiredAt']).orderBy('kid').execute();
      expect(rows).toEqual([
        { kid: 'es-a', generation: 1, createdAt: '2024-01-01T00:00:00.000Z', activatesAt: '2024-01-01T00:00:00.000Z', retiredAt: '2024-02-01T00:00:00.000Z' },
        { kid: 'es-b', generation: 3, createdAt: '2024-03-01T00:00:00.000Z', activatesAt: '2024-03-01T00:00:00.000Z', retiredAt: null },
        { kid: 'es-c', generation: 2, createdAt: '2024-02-01T00:00:00.000Z', activatesAt: '2024-02-01T00:00:00.000Z', retiredAt: '2024-03-01T00:00:00.000Z' },
        { kid: 'rs-x', generation: 1, createdAt: '2024-03-01T00:00:00.000Z', activatesAt: '2024-03-01T00:00:00.000Z', retiredAt: null },
        { kid: 'rs-y', generation: 2, createdAt: '2024-03-01T00:00:00.000Z', activatesAt: '2024-03-01T00:00:00.000Z', retiredAt: null },
      ]);
    } finally {
      await t.drop();
    }
  });

  it('lets only the encrypted private part of an audit key change (migration 015: keys rewrap)', async () => {
    const t = await createTestDatabase(kind);
    try {
      await t.db.kysely.insertInto('auditKeys').values({ kid: 'k1', publicJwk: '{"kty":"EC"}', privateJwkEncrypted: 'v1.old', createdAt: '2024-01-01T00:00:00.000Z' }).execute();
      await t.db.kysely.updateTable('auditKeys').set({ privateJwkEncrypted: 'v1.new' }).where('kid', '=', 'k1').execute();
      await expect(t.db.kysely.updateTable('auditKeys').set({ publicJwk: '{"kty":"RSA"}' }).execute()).rejects.toThrow(/append-only/);
      await expect(t.db.kysely.updateTable('auditKeys').set({ kid: 'k2' }).execute()).rejects.toThrow(/append-only/);
      await expect(t.db.kysely.updateTable('auditKeys').set({ createdAt: '2030-01-01T00:00:00.000Z', privateJwkEncrypted: 'v1.other' }).execute()).rejects.toThrow(/append-only/);
      await expect(t.db.kysely.deleteFrom('auditKeys').execute()).rejects.toThrow(/append-only/);
      if (kind === 'postgres') await expect(sql`truncate audit_keys`.execute(t.db.kysely)).rejects.toThrow(/append-only/);
      expect(await t.db.kysely.selectFrom('auditKeys').selectAll().execute()).toEqual([
        { kid: 'k1', publicJwk: '{"kty":"EC"}', privateJwkEncrypted: 'v1.new', createdAt: '2024-01-01T00:00:00.000Z' },
      ]);
    } finally {
      await t.drop();
    }
  });

  it('keeps the device codes waiting through migration 017: they count against their client, against no address', async () => {
    const t = await createTestDatabase(kind, { migrate: false });
    try {
      await migrateTo(t.db, '016-audit-key-rewrap');
      const legacy = t.db.kysely as unknown as Kysely<Record<string, Record<string, unknown>>>;
      const row = {
        deviceCodeHash: 'd1', userCode: 'BCDFGHJK', grantId: 'g1', clientId: 'tv', clientRegistrationId: 'r1', scopes: 'read:posts', status: 'pending',
        userId: null, authTime: null, intervalSeconds: 5, lastPolledAt: null, createdAt: '2024-01-01T00:00:00.000Z', expiresAt: '2024-01-01T00:10:00.000Z',
      };
      await legacy.insertInto('deviceCodes').values(row).execute();
      await migrateToLatest(t.db);
      expect(await t.db.kysely.selectFrom('deviceCodes').selectAll().execute()).toEqual([{ ...row, addressKey: null, declinedScopes: null }]);
      await insertDeviceCode(t.db.kysely, { ...row, deviceCodeHash: 'd2', userCode: 'LMNPQRST', grantId: 'g2', addressKey: '192.0.2.1', declinedScopes: null });
      const now = '2024-01-01T00:05:00.000Z';
      expect((await pendingDeviceCodes(t.db.kysely, 'r1', now)).count).toBe(2);
      expect((await pendingDeviceCodes(t.db.kysely, 'r1', now, '192.0.2.1')).count).toBe(1);
      expect((await pendingDeviceCodes(t.db.kysely, 'r1', now, '192.0.2.2')).count).toBe(0);
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
