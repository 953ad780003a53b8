import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { configFrom, type Config } from '../../src/config/config.js';
import { digestSecret, generateSecret } from '../../src/oauth/secrets.js';
import { insertClient, type ClientRecord, type NewClient } from '../../src/storage/clients.js';
import type { Db } from '../../src/storage/dialect.js';
import { newId, nowIso } from '../../src/storage/ids.js';

export const ISSUER = 'https://auth.portcullis.test';

/** A validated test configuration with its own temporary DATA_DIR. */
export function makeConfig(overrides: Record<string, string> = {}): Config {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'portcullis-oauth-'));
  return configFrom({ ISSUER, DATA_DIR: dataDir, ...overrides });
}

export interface TestClient {
  client: ClientRecord;
  secret: string;
}

/** Inserts a client (confidential, client_credentials, JWT) with a fresh client_id unless overridden. */
export async function createClient(db: Db, overrides: Partial<NewClient> = {}): Promise<TestClient> {
  const secret = generateSecret();
  const record: NewClient = {
    id: newId(),
    clientId: `client-${newId()}`,
    name: 'Test client',
    type: 'confidential',
    secretHash: digestSecret(secret),
    redirectUris: [],
    grantTypes: ['client_credentials'],
    scopes: ['read:posts', 'write:posts'],
    role: 'member',
    postLogoutRedirectUris: [],
    idTokenSignedResponseAlg: 'RS256',
    accessTokenFormat: 'jwt',
    accessTokenTtl: 600,
    rateLimit: null,
    firstParty: false,
    legacy: false,
    ...overrides,
  };
  const { secretHash: _secretHash, ...client } = await insertClient(db.kysely, record, nowIso());
  return { client, secret };
}
