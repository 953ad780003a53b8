/**
 * Portcullis built as in production, on embedded SQLite in a fresh directory, with the bench clients of
 * token-clients.ts and the bench user registered. The per-address limit of the OAuth endpoints is raised
 * (a million per second) so that one load generator on one address is never refused; the limiter still
 * runs on every request.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { buildApp, type App } from '../../src/app.js';
import { loadConfig, type Config } from '../../src/config/config.js';
import { hashPassword } from '../../src/oauth/passwords.js';
import { digestSecret } from '../../src/oauth/secrets.js';
import { insertClient, type NewClient } from '../../src/storage/clients.js';
import { newId, nowIso } from '../../src/storage/ids.js';
import { insertUser } from '../../src/storage/users.js';
import { ACCESS_TOKEN_TTL, BENCH_SECRET, BENCH_USER, JWT_CLIENT, OPAQUE_CLIENT, REDIRECT_URI, REFRESH_CLIENT, SCOPE } from './token-clients.js';

export interface TokenBenchApp {
  app: App;
  config: Config;
  /** Closes the app and removes its data directory. */
  close(): Promise<void>;
}

export async function buildTokenBenchApp(): Promise<TokenBenchApp> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'portcullis-bench-'));
  const config = loadConfig({
    // What the bench's server processes are started with (processes.ts), for a caller that runs it in-process.
    NODE_ENV: 'production',
    ISSUER: 'https://bench.invalid',
    KEY_ENCRYPTION_SECRET: 'bench-key-encryption-secret-0123456789abcdef',
    ...process.env,
    DATA_DIR: dataDir,
    PORT: '0',
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn',
    RATE_LIMIT_ANONYMOUS_MAX: '1000000',
    RATE_LIMIT_MAX: '1000000',
    RATE_LIMIT_ADDRESS_MAX: '1000000',
    RATE_LIMIT_WINDOW: '1',
  });
  const app = await buildApp(config);
  const db = app.db.kysely;
  const now = nowIso();
  const client = (clientId: string, overrides: Partial<NewClient>): NewClient => ({
    id: newId(),
    clientId,
    name: clientId,
    type: 'confidential',
    secretHash: digestSecret(BENCH_SECRET),
    redirectUris: [],
    grantTypes: ['client_credentials'],
    scopes: SCOPE.split(' '),
    role: 'editor',
    accessTokenFormat: 'jwt',
    accessTokenTtl: ACCESS_TOKEN_TTL,
    rateLimit: null,
    firstParty: true,
    legacy: false,
    postLogoutRedirectUris: [],
    idTokenSignedResponseAlg: 'ES256',
    ...overrides,
  });
  await insertClient(db, client(JWT_CLIENT, {}), now);
  await insertClient(db, client(OPAQUE_CLIENT, { accessTokenFormat: 'opaque' }), now);
  await insertClient(
    db,
    client(REFRESH_CLIENT, {
      redirectUris: [REDIRECT_URI],
      grantTypes: ['authorization_code', 'refresh_token'],
      scopes: [...SCOPE.split(' '), 'offline_access'],
      role: null,
    }),
    now,
  );
  await insertUser(
    db,
    { id: newId(), email: BENCH_USER.email, name: 'Bench', role: 'member', active: true, passwordHash: await hashPassword(BENCH_USER.password) },
    now,
  );
  return {
    app,
    config,
    async close() {
      await app.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
