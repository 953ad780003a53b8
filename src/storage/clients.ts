import type { Kysely, Selectable } from 'kysely';
import { recordInvalidation } from './invalidations.js';
import type { ClientsTable, Database } from './schema.js';

export type ClientType = 'confidential' | 'public';
export type TokenFormat = 'jwt' | 'opaque';
export type IdTokenAlg = 'RS256' | 'ES256';

/** An OAuth client as the domain sees it (the secret digest stays in storage). */
export interface ClientRecord {
  id: string;
  clientId: string;
  name: string;
  type: ClientType;
  redirectUris: string[];
  grantTypes: string[];
  scopes: string[];
  /** Only a client that may use client credentials acts on its own behalf, and so holds a role. */
  role: string | null;
  accessTokenFormat: TokenFormat;
  accessTokenTtl: number;
  /** Requests per rate-limit window, its users' included; null: the server's RATE_LIMIT_MAX. */
  rateLimit: number | null;
  firstParty: boolean;
  legacy: boolean;
  postLogoutRedirectUris: string[];
  idTokenSignedResponseAlg: IdTokenAlg;
  /**
   * How many times the client's tokens were revoked. A client-credentials JWT carries the count it was
   * issued under (it has no row to mark), and stops working once the count moves on.
   */
  revocations: number;
  createdAt: string;
  updatedAt: string;
}

export interface ClientWithSecret extends ClientRecord {
  secretHash: string | null;
}

/** Every column a client registration is served from: never the secret's digest. */
export const CLIENT_COLUMNS = [
  'id', 'clientId', 'name', 'type', 'redirectUris', 'grantTypes', 'scopes', 'role', 'accessTokenFormat', 'accessTokenTtl',
  'rateLimit', 'firstParty', 'legacy', 'postLogoutRedirectUris', 'idTokenSignedResponseAlg', 'createdAt', 'updatedAt',
] as const satisfies readonly (keyof ClientsTable)[];

export function toClientRecord(row: Selectable<ClientsTable>): ClientWithSecret {
  return {
    id: row.id,
    clientId: row.clientId,
    name: row.name,
    type: row.type as ClientType,
    secretHash: row.secretHash,
    redirectUris: JSON.parse(row.redirectUris) as string[],
    grantTypes: JSON.parse(row.grantTypes) as string[],
    scopes: JSON.parse(row.scopes) as string[],
    role: row.role,
    accessTokenFormat: row.accessTokenFormat as TokenFormat,
    accessTokenTtl: row.accessTokenTtl,
    rateLimit: row.rateLimit,
    firstParty: Boolean(row.firstParty),
    legacy: Boolean(row.legacy),
    postLogoutRedirectUris: JSON.parse(row.postLogoutRedirectUris) as string[],
    idTokenSignedResponseAlg: row.idTokenSignedResponseAlg as IdTokenAlg,
    revocations: row.revocations,
    createdAt: row.createdAt,
    updatedAt: row.updatedAt,
  };
}

export type NewClient = Omit<ClientWithSecret, 'revocations' | 'createdAt' | 'updatedAt'>;

export function clientRow(client: NewClient, createdAt: string, updatedAt: string): Selectable<ClientsTable> {
  return {
    id: client.id,
    clientId: client.clientId,
    name: client.name,
    type: client.type,
    secretHash: client.secretHash,
    redirectUris: JSON.stringify(client.redirectUris),
    grantTypes: JSON.stringify(client.grantTypes),
    scopes: JSON.stringify(client.scopes),
    role: client.role,
    accessTokenFormat: client.accessTokenFormat,
    accessTokenTtl: client.accessTokenTtl,
    rateLimit: client.rateLimit,
    firstParty: client.firstParty,
    legacy: client.legacy,
    postLogoutRedirectUris: JSON.stringify(client.postLogoutRedirectUris),
    idTokenSignedResponseAlg: client.idTokenSignedResponseAlg,
    revocations: 0,
    createdAt,
    updatedAt,
  };
}

export async function findClientByClientId(db: Kysely<Database>, clientId: string): Promise<ClientWithSecret | null> {
  const row = await db.selectFrom('clients').selectAll().where('clientId', '=', clientId).executeTakeFirst();
  return row ? toClientRecord(row) : null;
}

export async function findClientById(db: Kysely<Database>, id: string): Promise<ClientWithSecret | null> {
  const row = await db.selectFrom('clients').selectAll().where('id', '=', id).executeTakeFirst();
  return row ? toClientRecord(row) : null;
}

export async function insertClient(db: Kysely<Database>, client: NewClient, now: string): Promise<ClientWithSecret> {
  const row = clientRow(client, now, now);
  await db.insertInto('clients').values(row).execute();
  // The client_id may have belonged to a deleted registration that a running server still has cached.
  await recordInvalidation(db, 'client', row.clientId);
  return toClientRecord(row);
}

/** A registration's settings as a full replacement sets them (the type, client_id and secret never change). */
export type ClientSettingsRecord = Pick<
  ClientRecord,
  'name' | 'redirectUris' | 'postLogoutRedirectUris' | 'grantTypes' | 'scopes' | 'role' | 'accessTokenFormat' | 'accessTokenTtl' | 'rateLimit' | 'idTokenSignedResponseAlg' | 'firstParty' | 'legacy'
>;

/** As resource-rows.ts `updateRow`: only the version read (`readUpdatedAt`); false when it changed meanwhile. */
export async function updateClientSettings(db: Kysely<Database>, id: string, readUpdatedAt: string, settings: ClientSettingsRecord, updatedAt: string): Promise<boolean> {
  const result = await db
    .updateTable('clients')
    .set({
      name: settings.name,
      redirectUris: JSON.stringify(settings.redirectUris),
      postLogoutRedirectUris: JSON.stringify(settings.postLogoutRedirectUris),
      grantTypes: JSON.stringify(settings.grantTypes),
      scopes: JSON.stringify(settings.scopes),
      role: settings.role,
      accessTokenFormat: settings.accessTokenFormat,
      accessTokenTtl: settings.accessTokenTtl,
      rateLimit: settings.rateLimit,
      idTokenSignedResponseAlg: settings.idTokenSignedResponseAlg,
      firstParty: settings.firstParty,
      legacy: settings.legacy,
      updatedAt,
    })
    .where('id', '=', id)
    .where('updatedAt', '=', readUpdatedAt)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

export async function deleteClientRow(db: Kysely<Database>, id: string): Promise<void> {
  await db.deleteFrom('clients').where('id', '=', id).execute();
}
