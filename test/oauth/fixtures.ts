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

/**
 * Waiting device codes of `client` stored directly, 500 rows a statement (what many device authorization
 * requests would leave behind): each with its own key (its code's digest), user code and expiry.
 */
export async function insertWaitingDeviceCodes(
  db: Db,
  client: ClientRecord,
  codes: readonly { key: string; userCode: string; expiresAt: number; addressKey?: string }[],
): Promise<void> {
  const createdAt = nowIso();
  const rows = codes.map(({ key, userCode, expiresAt, addressKey = null }) => ({
    deviceCodeHash: key,
    userCode,
    grantId: `${key}-grant`,
    clientId: client.clientId,
    clientRegistrationId: client.id,
    addressKey,
    scopes: 'read:posts',
    status: 'pending',
    userId: null,
    authTime: null,
    intervalSeconds: 5,
    lastPolledAt: null,
    createdAt,
    expiresAt: new Date(expiresAt).toISOString(),
  }));
  for (let i = 0; i < rows.length; i += 500) await db.kysely.insertInto('deviceCodes').values(rows.slice(i, i + 500)).execute();
}
