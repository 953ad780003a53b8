import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { buildApp, type App } from '../../src/app.js';
import { configFrom } from '../../src/config/config.js';
import { findClientByClientId } from '../../src/storage/clients.js';
import { newId, nowIso } from '../../src/storage/ids.js';
import { insertUser, type Role } from '../../src/storage/users.js';
import { createTestDatabase, type TestDatabase } from './databases.js';

export const ADMIN_CLIENT_ID = 'portcullis-admin';
export const ADMIN_CLIENT_SECRET = 'test-admin-client-secret-0123456789abcdefghij';
export const ALL_API_SCOPES = [
  'read:users', 'write:users', 'read:posts', 'write:posts', 'read:comments', 'write:comments',
  'read:clients', 'write:clients', 'read:audit', 'read:schema',
];

export interface TestUser {
  id: string;
  email: string;
  role: Role;
  /** A bearer token for this user with the given scopes (all API scopes by default). */
  token(scopes?: string[], options?: { format?: 'jwt' | 'opaque' }): Promise<string>;
}

export interface TestApp {
  app: App;
  database: TestDatabase;
  dataDir: string;
  request(options: { method?: string; url: string; token?: string; headers?: Record<string, string>; body?: unknown; payload?: string }): Promise<{
    statusCode: number;
    headers: Record<string, string | string[] | number | undefined>;
    body: string;
    json(): any;
  }>;
  /** A token from the bootstrapped admin client through POST /oauth/token (client_credentials). */
  adminClientToken(scope?: string): Promise<string>;
  createUser(role: Role, overrides?: { active?: boolean; email?: string }): Promise<TestUser>;
  close(): Promise<void>;
}

export async function startTestApp(kind: 'sqlite' | 'postgres', env: Record<string, string> = {}): Promise<TestApp> {
  const database = await createTestDatabase(kind);
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'portcullis-test-'));
  const config = configFrom({
    DATA_DIR: dataDir,
    ISSUER: 'http://127.0.0.1:3000',
    BOOTSTRAP_ADMIN_EMAIL: 'admin@example.com',
    BOOTSTRAP_ADMIN_PASSWORD: 'admin-password-for-tests',
    BOOTSTRAP_CLIENT_ID: ADMIN_CLIENT_ID,
    BOOTSTRAP_CLIENT_SECRET: ADMIN_CLIENT_SECRET,
    KEY_ENCRYPTION_SECRET: 'test-key-encryption-secret-0123456789abcdef',
    ...env,
  });
  const app = await buildApp(config, { db: database.db });
  const adminClient = (await findClientByClientId(database.db.kysely, ADMIN_CLIENT_ID))!;

  const request: TestApp['request'] = async ({ method = 'GET', url, token, headers = {}, body, payload }) => {
    const res = await app.fastify.inject({
      method: method as never,
      url,
      headers: {
        ...(token ? { authorization: `Bearer ${token}` } : {}),
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        ...headers,
      },
      payload: payload ?? (body !== undefined ? JSON.stringify(body) : undefined),
    });
    return { statusCode: res.statusCode, headers: res.headers, body: res.body, json: () => JSON.parse(res.body) };
  };

  return {
    app,
    database,
    dataDir,
    request,
    async adminClientToken(scope) {
      const res = await app.fastify.inject({
        method: 'POST',
        url: '/oauth/token',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          authorization: `Basic ${Buffer.from(`${ADMIN_CLIENT_ID}:${ADMIN_CLIENT_SECRET}`).toString('base64')}`,
        },
        payload: new URLSearchParams({ grant_type: 'client_credentials', ...(scope ? { scope } : {}) }).toString(),
      });
      if (res.statusCode !== 200) throw new Error(`token request failed: ${res.statusCode} ${res.body}`);
      return (JSON.parse(res.body) as { access_token: string }).access_token;
    },
    async createUser(role, overrides = {}) {
      const id = newId();
      const email = overrides.email ?? `${role}-${id}@example.com`;
      await insertUser(database.db.kysely, { id, email, name: `${role} ${id.slice(-4)}`, role, active: overrides.active ?? true, passwordHash: 'unused' }, nowIso());
      return {
        id,
        email,
        role,
        async token(scopes = ALL_API_SCOPES, options = {}) {
          const issued = await app.tokens.issueAccessToken({
            client: { ...adminClient, accessTokenFormat: options.format ?? 'jwt' },
            subject: id,
            subjectType: 'user',
            scopes,
            grantType: 'authorization_code',
          });
          return issued.accessToken;
        },
      };
    },
    async close() {
      await app.close();
      await database.drop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
