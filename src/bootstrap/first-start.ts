import fs from 'node:fs/promises';
import path from 'node:path';
import type { Config } from '../config/config.js';
import { hashPassword } from '../oauth/passwords.js';
import { digestSecret, generateSecret } from '../oauth/secrets.js';
import { insertClient } from '../storage/clients.js';
import type { Db } from '../storage/dialect.js';
import { newId, nowIso } from '../storage/ids.js';
import { isUniqueViolation } from '../storage/unique-violation.js';
import { insertUser } from '../storage/users.js';
import { USER_SCOPES } from '../oauth/scopes.js';

export const BOOTSTRAP_FILE = 'bootstrap.json';
const DEFAULT_ADMIN_EMAIL = 'admin@portcullis.local';
const DEFAULT_CLIENT_ID = 'portcullis-admin';

/** What was created. The secrets are only in the file, so a caller that logs this leaks nothing. */
export interface BootstrapResult {
  file: string;
  adminUserId: string;
  adminEmail: string;
  clientId: string;
}

/** The shape of `DATA_DIR/bootstrap.json`. */
export interface BootstrapFile {
  issuer: string;
  admin: { email: string; password: string };
  clients: { admin: { client_id: string; client_secret: string } };
}

/**
 * First start with no users: create an admin user and an admin client (client credentials, every API
 * scope) in one transaction, then hand their credentials to the operator in `DATA_DIR/bootstrap.json`
 * (mode 0600). When two instances start at once, the unique email and client_id constraints let exactly
 * one transaction commit; the other returns null and writes nothing.
 */
export async function bootstrapIfEmpty(db: Db, config: Config, scopes: readonly string[]): Promise<BootstrapResult | null> {
  if (await hasUsers(db)) return null;
  const email = config.bootstrap.adminEmail ?? DEFAULT_ADMIN_EMAIL;
  // 256 random bits: a 43-character password, far over the 12-character minimum for users.
  const password = config.bootstrap.adminPassword ?? generateSecret();
  const clientId = config.bootstrap.clientId ?? DEFAULT_CLIENT_ID;
  const clientSecret = config.bootstrap.clientSecret ?? generateSecret();
  const passwordHash = await hashPassword(password);
  const adminUserId = newId();
  const now = nowIso();
  try {
    await db.kysely.transaction().execute(async (trx) => {
      await insertUser(trx, { id: adminUserId, email, name: 'Administrator', role: 'admin', active: true, passwordHash }, now);
      await insertClient(
        trx,
        {
          id: newId(),
          clientId,
          name: 'Portcullis administration',
          type: 'confidential',
          secretHash: digestSecret(clientSecret),
          redirectUris: [],
          grantTypes: ['client_credentials'],
          scopes: scopes.filter((scope) => !USER_SCOPES.has(scope)),
          role: 'admin',
          accessTokenFormat: 'jwt',
          accessTokenTtl: config.tokens.accessTokenTtl,
          rateLimit: null,
          firstParty: true,
          legacy: false,
          postLogoutRedirectUris: [],
          idTokenSignedResponseAlg: 'RS256',
        },
        now,
      );
    });
  } catch (error) {
    // Lost the race to another instance: it created the admin and wrote the file.
    if (isUniqueViolation(error) && (await hasUsers(db))) return null;
    throw error;
  }
  const file = await writeBootstrapFile(config, {
    issuer: config.issuer,
    admin: { email, password },
    clients: { admin: { client_id: clientId, client_secret: clientSecret } },
  });
  return { file, adminUserId, adminEmail: email, clientId };
}

async function hasUsers(db: Db): Promise<boolean> {
  return (await db.kysely.selectFrom('users').select('id').limit(1).executeTakeFirst()) !== undefined;
}

/** Written to a private temporary file and renamed, so the credentials are never readable by others. */
async function writeBootstrapFile(config: Config, contents: BootstrapFile): Promise<string> {
  await fs.mkdir(config.dataDir, { recursive: true, mode: 0o700 });
  const file = path.join(config.dataDir, BOOTSTRAP_FILE);
  const temporary = `${file}.${process.pid}.tmp`;
  // A leftover from a crashed start may have other permissions: never write through it.
  await fs.rm(temporary, { force: true });
  await fs.writeFile(temporary, `${JSON.stringify(contents, null, 2)}\n`, { mode: 0o600, flag: 'wx' });
  await fs.rename(temporary, file);
  return file;
}
