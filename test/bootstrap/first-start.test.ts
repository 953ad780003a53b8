import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { bootstrapIfEmpty, type BootstrapFile } from '../../src/bootstrap/first-start.js';
import { verifyPassword } from '../../src/oauth/passwords.js';
import { findClientByClientId } from '../../src/storage/clients.js';
import { openDb } from '../../src/storage/dialect.js';
import { findUserCredentials } from '../../src/storage/users.js';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../helpers/databases.js';
import { ISSUER, makeConfig } from '../oauth/fixtures.js';
import { basic, buildOAuthApp, form, FORM } from '../oauth/oauth-app.js';

const CATALOGUE = ['read:users', 'write:users', 'read:posts', 'write:posts', 'openid', 'profile', 'email', 'offline_access'];
const API_SCOPES = ['read:users', 'write:users', 'read:posts', 'write:posts'];

function readBootstrapFile(file: string): BootstrapFile {
  return JSON.parse(fs.readFileSync(file, 'utf8')) as BootstrapFile;
}

describe.each(DATABASE_KINDS)('first start on %s', (kind) => {
  let t: TestDatabase;
  afterEach(() => t.drop());

  it('creates the admin user and client and writes bootstrap.json (0600) with their credentials', async () => {
    t = await createTestDatabase(kind);
    const config = makeConfig({ DATA_DIR: path.join(makeConfig().dataDir, 'nested', 'data') });
    const result = await bootstrapIfEmpty(t.db, config, CATALOGUE);
    const file = path.join(config.dataDir, 'bootstrap.json');
    expect(result).toEqual({ file, adminUserId: expect.any(String), adminEmail: 'admin@portcullis.local', clientId: 'portcullis-admin' });
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect(fs.statSync(config.dataDir).mode & 0o777).toBe(0o700);
    expect(fs.readdirSync(config.dataDir)).toEqual(['bootstrap.json']);

    const contents = readBootstrapFile(file);
    expect(contents).toEqual({
      issuer: ISSUER,
      admin: { email: 'admin@portcullis.local', password: expect.stringMatching(/^.{20,}$/) },
      clients: { admin: { client_id: 'portcullis-admin', client_secret: expect.stringMatching(/^[A-Za-z0-9_-]{43,}$/) } },
    });

    const admin = await findUserCredentials(t.db.kysely, 'admin@portcullis.local');
    expect(admin).toMatchObject({ id: result!.adminUserId, role: 'admin', active: true });
    await expect(verifyPassword(contents.admin.password, admin!.passwordHash)).resolves.toBe(true);

    const client = await findClientByClientId(t.db.kysely, 'portcullis-admin');
    expect(client).toMatchObject({
      type: 'confidential',
      grantTypes: ['client_credentials'],
      scopes: API_SCOPES,
      role: 'admin',
      accessTokenFormat: 'jwt',
      accessTokenTtl: config.tokens.accessTokenTtl,
      firstParty: true,
      legacy: false,
    });
    expect(client!.secretHash).not.toContain(contents.clients.admin.client_secret);
  });

  it('does nothing on the second run', async () => {
    t = await createTestDatabase(kind);
    const config = makeConfig();
    const first = await bootstrapIfEmpty(t.db, config, CATALOGUE);
    fs.rmSync(first!.file);
    await expect(bootstrapIfEmpty(t.db, config, CATALOGUE)).resolves.toBeNull();
    expect(fs.existsSync(first!.file)).toBe(false);
    expect(await t.db.kysely.selectFrom('users').select('id').execute()).toHaveLength(1);
    expect(await t.db.kysely.selectFrom('clients').select('id').execute()).toHaveLength(1);
  });

  it('uses the BOOTSTRAP_* settings when given', async () => {
    t = await createTestDatabase(kind);
    const config = makeConfig({
      BOOTSTRAP_ADMIN_EMAIL: 'root@example.org',
      BOOTSTRAP_ADMIN_PASSWORD: 'a long enough password',
      BOOTSTRAP_CLIENT_ID: 'ops',
      BOOTSTRAP_CLIENT_SECRET: 'x'.repeat(40),
    });
    const result = await bootstrapIfEmpty(t.db, config, CATALOGUE);
    expect(readBootstrapFile(result!.file)).toEqual({
      issuer: ISSUER,
      admin: { email: 'root@example.org', password: 'a long enough password' },
      clients: { admin: { client_id: 'ops', client_secret: 'x'.repeat(40) } },
    });
  });

  it('gives the bootstrapped client a token through client_credentials that verifies', async () => {
    t = await createTestDatabase(kind);
    const config = makeConfig();
    const result = await bootstrapIfEmpty(t.db, config, CATALOGUE);
    const { clients } = readBootstrapFile(result!.file);
    const oauth = await buildOAuthApp(t.db, config, CATALOGUE);
    try {
      const response = await oauth.app.inject({
        method: 'POST',
        url: '/oauth/token',
        headers: { ...FORM, authorization: basic(clients.admin.client_id, clients.admin.client_secret) },
        payload: form({ grant_type: 'client_credentials' }),
      });
      expect(response.statusCode).toBe(200);
      const body = response.json();
      expect(body).toEqual({
        access_token: expect.any(String),
        token_type: 'Bearer',
        expires_in: config.tokens.accessTokenTtl,
        scope: API_SCOPES.join(' '),
      });
      await expect(oauth.tokens.verifyAccessToken(body.access_token)).resolves.toMatchObject({
        clientId: 'portcullis-admin',
        subject: 'portcullis-admin',
        subjectType: 'client',
        scopes: API_SCOPES,
      });
    } finally {
      await oauth.app.close();
    }
  });

  it('lets exactly one of two instances starting at once bootstrap; the other writes nothing', async () => {
    t = await createTestDatabase(kind);
    const config = makeConfig();
    // Two connections on PostgreSQL, as two processes would have; SQLite in memory has only the one.
    const second = t.url ? await openDb({ databaseUrl: t.url, dataDir: '' }) : t.db;
    try {
      const results = await Promise.all([bootstrapIfEmpty(t.db, config, CATALOGUE), bootstrapIfEmpty(second, config, CATALOGUE)]);
      const winners = results.filter((result) => result !== null);
      expect(winners).toHaveLength(1);
      expect(fs.readdirSync(config.dataDir)).toEqual(['bootstrap.json']);
      const contents = readBootstrapFile(winners[0]!.file);
      const admin = await findUserCredentials(t.db.kysely, contents.admin.email);
      expect(admin!.id).toBe(winners[0]!.adminUserId);
      await expect(verifyPassword(contents.admin.password, admin!.passwordHash)).resolves.toBe(true);
      expect(await t.db.kysely.selectFrom('users').select('id').execute()).toHaveLength(1);
      expect(await t.db.kysely.selectFrom('clients').select('id').execute()).toHaveLength(1);
    } finally {
      if (second !== t.db) await second.close();
    }
  });
});
