import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { policy } from '../../generated/policy.js';
import { buildApp, type App, type ServedApi } from '../../src/app.js';
import { configFrom } from '../../src/config/config.js';
import { hashPassword } from '../../src/oauth/passwords.js';
import { USER_SCOPES } from '../../src/oauth/scopes.js';
import { generateSecret } from '../../src/oauth/secrets.js';
import { checkClientSettings } from '../../src/operations/client-settings.js';
import type { PolicyTable } from '../../src/policy/table.js';
import { findClientByClientId } from '../../src/storage/clients.js';
import { newId, nowIso } from '../../src/storage/ids.js';
import { insertUser, type Role } from '../../src/storage/users.js';
import { createTestDatabase, type TestDatabase } from './databases.js';
import { SignInBrowser, throughInject } from './sign-in-browser.js';

export const ADMIN_CLIENT_ID = 'portcullis-admin';
export const ADMIN_CLIENT_SECRET = 'test-admin-client-secret-0123456789abcdefghij';
/** Every scope of the API the contract declares (a resource added to it brings its own): all but OpenID Connect's. */
export const ALL_API_SCOPES = Object.keys(policy.scopes).filter((scope) => !USER_SCOPES.has(scope));
/** Where the admin client's authorization responses go (a loopback URI: nothing needs to listen there). */
export const ADMIN_CLIENT_REDIRECT_URI = 'http://127.0.0.1/callback';
/** The password of every test user that signs in (`TestUser.signIn`). */
export const TEST_USER_PASSWORD = 'test-user-password-0123';

/** One scrypt hash per process: at the production cost it takes a second or two on a loaded machine. */
let testPasswordHash: Promise<string> | undefined;

export interface TestUser {
  id: string;
  email: string;
  role: Role;
  /**
   * A bearer token for this user with the given scopes (all API scopes by default), minted directly: what
   * the authorization code grant issues to the admin client, without the pages. Cheap, for bulk use.
   */
  token(scopes?: string[], options?: { format?: 'jwt' | 'opaque' }): Promise<string>;
  /**
   * A bearer token through the real authorization code grant with PKCE: the user signs in on the login page
   * (the admin client is first-party, so no consent page) and the client redeems the code at /oauth/token.
   */
  signIn(scopes?: string[]): Promise<string>;
  /** Gives the user a password to sign in with (TEST_USER_PASSWORD, stored as the server stores passwords) and returns it. */
  password(): Promise<string>;
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

/**
 * `api`: serve this instead of the generated contract (a test that adds a resource type). `wrapDb`: what
 * the app is given instead of the test database's handle (one with a statement log, say).
 */
export async function startTestApp(
  kind: 'sqlite' | 'postgres',
  env: Record<string, string> = {},
  options: { api?: ServedApi; wrapDb?: (db: TestDatabase['db']) => TestDatabase['db'] } = {},
): Promise<TestApp> {
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
  const app = await buildApp(config, { db: options.wrapDb ? options.wrapDb(database.db) : database.db, api: options.api });
  const adminClient = await letAdminClientSignUsersIn(database, options.api?.policy ?? policy);

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
      const password = async () => {
        testPasswordHash ??= hashPassword(TEST_USER_PASSWORD);
        await database.db.kysely.updateTable('users').set({ passwordHash: await testPasswordHash }).where('id', '=', id).execute();
        return TEST_USER_PASSWORD;
      };
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
            // Each sign-in is a grant of its own, which a replayed code or a revoked refresh token ends.
            grantId: newId(),
          });
          return issued.accessToken;
        },
        async signIn(scopes = ALL_API_SCOPES) {
          return signInThroughPages(app, config.issuer, { email, password: await password() }, scopes);
        },
        password,
      };
    },
    async close() {
      await app.close();
      await database.drop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * The bootstrapped admin client (confidential, first-party) is registered for the authorization code grant
 * as well, with a loopback redirect URI, so that the user tokens the suites use — minted or from a real
 * sign-in — belong to a client the server issues them to. The registration passes the API's own checks.
 */
async function letAdminClientSignUsersIn(database: TestDatabase, served: PolicyTable) {
  const bootstrapped = (await findClientByClientId(database.db.kysely, ADMIN_CLIENT_ID))!;
  const grantTypes = [...bootstrapped.grantTypes, 'authorization_code'];
  const redirectUris = [ADMIN_CLIENT_REDIRECT_URI];
  checkClientSettings(served, { ...bootstrapped, grantTypes, redirectUris });
  await database.db.kysely
    .updateTable('clients')
    .set({ grantTypes: JSON.stringify(grantTypes), redirectUris: JSON.stringify(redirectUris) })
    .where('id', '=', bootstrapped.id)
    .execute();
  return (await findClientByClientId(database.db.kysely, ADMIN_CLIENT_ID))!;
}

/** RFC 6749 §4.1 with RFC 7636 (S256), through the pages via inject; fails loudly at the first surprise. */
async function signInThroughPages(app: App, issuer: string, user: { email: string; password: string }, scopes: string[]): Promise<string> {
  const verifier = generateSecret();
  const state = generateSecret();
  const query = new URLSearchParams({
    response_type: 'code',
    client_id: ADMIN_CLIENT_ID,
    redirect_uri: ADMIN_CLIENT_REDIRECT_URI,
    scope: scopes.join(' '),
    state,
    code_challenge: createHash('sha256').update(verifier).digest('base64url'),
    code_challenge_method: 'S256',
  });
  const outcome = await new SignInBrowser(throughInject(app.fastify), issuer).visit(`/oauth/authorize?${query}`, user);
  if (outcome.redirect === undefined) throw new Error(`the sign-in ended on a page: ${outcome.page.status} ${outcome.page.body}`);
  const back = outcome.redirect;
  const code = back.searchParams.get('code');
  if (`${back.origin}${back.pathname}` !== ADMIN_CLIENT_REDIRECT_URI || back.searchParams.get('state') !== state || back.searchParams.get('iss') !== issuer || code === null) {
    throw new Error(`unexpected authorization response: ${back.href}`);
  }
  const res = await app.fastify.inject({
    method: 'POST',
    url: '/oauth/token',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      authorization: `Basic ${Buffer.from(`${ADMIN_CLIENT_ID}:${ADMIN_CLIENT_SECRET}`).toString('base64')}`,
    },
    payload: new URLSearchParams({ grant_type: 'authorization_code', code, redirect_uri: ADMIN_CLIENT_REDIRECT_URI, code_verifier: verifier }).toString(),
  });
  if (res.statusCode !== 200) throw new Error(`token request failed: ${res.statusCode} ${res.body}`);
  return (JSON.parse(res.body) as { access_token: string }).access_token;
}
